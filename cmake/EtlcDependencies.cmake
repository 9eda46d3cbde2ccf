# Every dependency comes from a Debian 12 package (scripts/bootstrap installs them).
find_package(Threads REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(nlohmann_json 3.11 CONFIG REQUIRED)
# cpp-httplib, for the optional /metrics endpoint (MetricsServer). Debian ships it as a compiled
# library whose header must see the same CPPHTTPLIB_* definitions: take them from pkg-config.
find_package(PkgConfig REQUIRED)
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET GLOBAL cpp-httplib>=0.11)

if(ETLC_WITH_NATS)
  # Debian 12's cnats-config.cmake references a libnats_static.a the package does not ship, so
  # find_package(cnats) fails hard; pkg-config finds the shared library correctly.
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(NATS REQUIRED IMPORTED_TARGET GLOBAL libnats>=3.4)
endif()

if(ETLC_WITH_POSTGRES AND (ETLC_BUILD_EXAMPLES OR ETLC_BUILD_BENCH))
  # libpq (libpq-dev) for examples/pg_backfill, its tests and its benchmark.
  pkg_check_modules(PQ REQUIRED IMPORTED_TARGET GLOBAL libpq)
endif()

if(ETLC_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
  find_package(rapidcheck CONFIG REQUIRED)
endif()
if(ETLC_BUILD_BENCH)
  find_package(benchmark CONFIG REQUIRED)
endif()
if(ETLC_BUILD_EXAMPLES OR ETLC_BUILD_TOOLS)
  find_package(CLI11 CONFIG REQUIRED)
endif()
