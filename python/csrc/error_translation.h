// Maps dualkv's C++ errors onto the exceptions torch turns into Python ones: dualkv::Error (bad
// input) becomes c10::ValueError -> ValueError, dualkv::RuntimeError becomes c10::Error ->
// RuntimeError. The message is kept verbatim so the offending argument stays named.
#pragma once

#include <c10/util/Exception.h>

#include "dualkv/errors.h"

namespace dualkv::torch_binding {

template <typename Function>
decltype(auto) translate_errors(Function&& function) {
  try {
    return function();
  } catch (const Error& error) {
    C10_THROW_ERROR(ValueError, error.what());
  } catch (const RuntimeError& error) {
    C10_THROW_ERROR(Error, error.what());
  }
}

}  // namespace dualkv::torch_binding
