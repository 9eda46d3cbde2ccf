include(CMakePackageConfigHelpers)

# Everything a consumer of the library needs (static library, headers, CMake package) is in the
# install component etlc_development, so `cmake --install <build> --component etlc_development`
# installs the package without the tools (tests/install does that). A plain `cmake --install`
# still installs every component.
set(ETLC_DEV_COMPONENT etlc_development)

install(TARGETS etlc_coordination EXPORT etlcTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ${ETLC_DEV_COMPONENT}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/etlc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT ${ETLC_DEV_COMPONENT})
install(EXPORT etlcTargets NAMESPACE etlc:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/etlc
        COMPONENT ${ETLC_DEV_COMPONENT})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/etlcConfig.cmake.in
  ${PROJECT_BINARY_DIR}/etlcConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/etlc)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/etlcConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/etlcConfig.cmake ${PROJECT_BINARY_DIR}/etlcConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/etlc COMPONENT ${ETLC_DEV_COMPONENT})

# etlc.pc for pkg-config consumers, beside the CMake package. Its prefix is found relative to the
# file itself (${pcfiledir}), so the installed tree can be moved (a .deb unpacked in a scratch
# root, `cmake --install --prefix` anywhere). The library is static: its dependencies are public
# Requires, so `pkg-config --libs etlc` links without --static.
file(RELATIVE_PATH ETLC_PC_PREFIX_FROM_PCDIR "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" ETLC_PC_PREFIX_FROM_PCDIR "${ETLC_PC_PREFIX_FROM_PCDIR}")
set(ETLC_PC_REQUIRES "fmt spdlog nlohmann_json cpp-httplib")
set(ETLC_PC_CFLAGS "")
if(ETLC_WITH_NATS)
  string(APPEND ETLC_PC_REQUIRES " libnats")
  set(ETLC_PC_CFLAGS "-DETLC_WITH_NATS=1")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/etlc.pc.in ${PROJECT_BINARY_DIR}/etlc.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/etlc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT ${ETLC_DEV_COMPONENT})
