# `cmake --install build --prefix PREFIX` installs the commands, the
# libraries, their public headers and a CMake package, so that a C++
# program elsewhere builds with
#   find_package(hfta REQUIRED)
#   target_link_libraries(app PRIVATE hfta::passes)   # or hfta::register, hfta::runtime
# (PREFIX on CMAKE_PREFIX_PATH). Headers: include/hfta's (<hfta/hfta.h>,
# <hfta/io.h>, <hfta/parallel.h>, <hfta/register.h>), and the runtime's (<hfta/runtime/optim/optimizers.h>).
include(CMakePackageConfigHelpers)

set_target_properties(hfta_support PROPERTIES EXPORT_NAME support)
set_target_properties(hfta_io PROPERTIES EXPORT_NAME io)
set_target_properties(hfta_runtime PROPERTIES EXPORT_NAME runtime)
set_target_properties(hfta_passes PROPERTIES EXPORT_NAME passes)
set_target_properties(hfta_register PROPERTIES EXPORT_NAME register)
install(TARGETS hfta_support hfta_runtime hfta_io hfta_passes hfta_register EXPORT hftaTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS hfta-fuse hfta-split hfta-opt hfta-train RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/hfta/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hfta)
# The headers the public ones and the runtime's include, as they include them.
foreach(folder support runtime)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hfta/${folder}
    FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
endforeach()

set(HFTA_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/hfta)
install(EXPORT hftaTargets NAMESPACE hfta:: DESTINATION ${HFTA_PACKAGE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/hftaConfig.cmake.in
  ${CMAKE_BINARY_DIR}/hftaConfig.cmake INSTALL_DESTINATION ${HFTA_PACKAGE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/hftaConfigVersion.cmake
  VERSION 0.1.0 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/hftaConfig.cmake ${CMAKE_BINARY_DIR}/hftaConfigVersion.cmake
  DESTINATION ${HFTA_PACKAGE_DIR})
