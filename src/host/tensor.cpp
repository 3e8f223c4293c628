#include "dualkv/tensor.h"

namespace dualkv {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
  }
  return "unknown";
}

int dtype_size(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

}  // namespace dualkv
