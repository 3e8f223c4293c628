# `cmake --install` of the C++ library as a CMake package (component "cpp"): the public headers,
# libdualkv.a and dualkv::dualkv in lib/cmake/dualkv, so that another project does
#     find_package(dualkv REQUIRED)
#     target_link_libraries(app PRIVATE dualkv::dualkv)
# The pip build installs only component "python" (pyproject.toml), so none of this lands in a wheel.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DUALKV_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dualkv)
install(TARGETS dualkv EXPORT dualkvTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT cpp
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/dualkv DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT cpp)
install(EXPORT dualkvTargets NAMESPACE dualkv:: DESTINATION ${DUALKV_PACKAGE_DIR} COMPONENT cpp)

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/dualkvConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/dualkvConfig.cmake INSTALL_DESTINATION ${DUALKV_PACKAGE_DIR})
# 0.x releases may change the API between minor versions.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/dualkvConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/dualkvConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/dualkvConfigVersion.cmake
  DESTINATION ${DUALKV_PACKAGE_DIR} COMPONENT cpp)
