include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS etlc_coordination EXPORT etlcTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/etlc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT etlcTargets NAMESPACE etlc:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/etlc)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/etlcConfig.cmake.in
  ${PROJECT_BINARY_DIR}/etlcConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/etlc)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/etlcConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/etlcConfig.cmake ${PROJECT_BINARY_DIR}/etlcConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/etlc)
