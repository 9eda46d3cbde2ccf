# etlc_project_options: warnings (and -Werror in CI) plus sanitizers, for every target we build.
add_library(etlc_project_options INTERFACE)
target_compile_options(etlc_project_options INTERFACE -Wall -Wextra -Wpedantic -Wshadow
                       -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual
                       -Wnull-dereference -Wimplicit-fallthrough)
if(ETLC_THREAD_SAFETY)
  # GUARDED_BY, REQUIRES and friends (etlc/detail/thread_annotations.hpp) become compile errors.
  target_compile_options(etlc_project_options INTERFACE -Wthread-safety -Wthread-safety-beta)
endif()
if(ETLC_WERROR)
  target_compile_options(etlc_project_options INTERFACE -Werror)
endif()
if(ETLC_SANITIZE)
  target_compile_options(etlc_project_options INTERFACE -fsanitize=${ETLC_SANITIZE}
                         -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(etlc_project_options INTERFACE -fsanitize=${ETLC_SANITIZE})
endif()
if(ETLC_ASSERTIONS)
  target_compile_definitions(etlc_project_options INTERFACE ETLC_ASSERTIONS=1)
else()
  target_compile_definitions(etlc_project_options INTERFACE ETLC_ASSERTIONS=0)
endif()
