# Debian packages with CPack: `cpack -G DEB` in a build tree (docs/getting-started.md).
#   libetlc-dev  the static library, headers, CMake package and etlc.pc (component
#                etlc_development); depends on the -dev packages a consumer compiles against
#   etlc-tools   the etlc operator tool (component etlc_tools); its shared-library dependencies
#                are computed by dpkg-shlibdeps
# Both install under /usr. tests/install builds them, unpacks them into a scratch root and builds
# a consumer against it.
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "etlc")
set(CPACK_PACKAGE_VENDOR "etl-coordination")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL etlc_development etlc_tools)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "etl-coordination maintainers")
set(CPACK_DEBIAN_PACKAGE_SECTION "libdevel")
set(CPACK_DEBIAN_COMPRESSION_TYPE "gzip")  # fast: the test packages a Debug build too

set(CPACK_DEBIAN_ETLC_DEVELOPMENT_PACKAGE_NAME "libetlc-dev")
set(CPACK_COMPONENT_ETLC_DEVELOPMENT_DESCRIPTION
    "etl-coordination: static library, headers, CMake package (etlc::coordination) and etlc.pc")
# What a consumer compiles and links against (the library is static and its public headers
# include none of them, but its objects need their shared libraries and etlc/log_spdlog.hpp needs
# spdlog); pkg-config reads etlc.pc and the CMake package finds cpp-httplib and nats.c with it.
set(_etlc_dev_depends "libspdlog-dev, libfmt-dev, nlohmann-json3-dev, libcpp-httplib-dev, pkgconf")
if(ETLC_WITH_NATS)
  string(APPEND _etlc_dev_depends ", libnats-dev")
endif()
set(CPACK_DEBIAN_ETLC_DEVELOPMENT_PACKAGE_DEPENDS "${_etlc_dev_depends}")

set(CPACK_DEBIAN_ETLC_TOOLS_PACKAGE_NAME "etlc-tools")
set(CPACK_DEBIAN_ETLC_TOOLS_PACKAGE_SECTION "admin")
set(CPACK_COMPONENT_ETLC_TOOLS_DESCRIPTION
    "etl-coordination: the etlc tool to inspect and operate coordinated jobs in NATS")
set(CPACK_DEBIAN_ETLC_TOOLS_PACKAGE_SHLIBDEPS ON)

include(CPack)
