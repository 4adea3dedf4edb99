# C test programs: every tests/c/test_*.c is a standalone program that exits 0
# on success. Built against the library sources directly (static), so the
# sanitizer builds instrument kernels and engine alike. The pool's tests
# (test_pool*) link only the pool, so a ThreadSanitizer build of them
# (`ninja test_pool test_pool_condvar`) compiles a handful of files.
file(GLOB HWTUNE_C_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tests/c/test_*.c)
file(GLOB HWTUNE_POOL_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/engine/threads/*.c)

add_library(hwtune_static STATIC ${HWTUNE_KERNEL_SOURCES} ${HWTUNE_ENGINE_SOURCES})
add_library(hwtune_pool_static STATIC ${HWTUNE_POOL_SOURCES})
foreach(lib hwtune_static hwtune_pool_static)
  target_include_directories(${lib} PUBLIC kernels/include engine/include)
  target_compile_options(${lib} PRIVATE ${HWTUNE_WARN})
  target_compile_definitions(${lib} PRIVATE _GNU_SOURCE)
  target_link_libraries(${lib} PUBLIC Threads::Threads m)
endforeach()
# Link-only: OpenMP's usage requirements would add -fopenmp to every source
# of the library, while only engine/*omp* files are meant to be OpenMP code.
foreach(extra ${HWTUNE_EXTRA_LIBS})
  target_link_libraries(hwtune_static PUBLIC $<LINK_ONLY:${extra}>)
endforeach()

foreach(src ${HWTUNE_C_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_compile_options(${name} PRIVATE ${HWTUNE_WARN})
  # The runner's database rules (standalone.cmake reads them from migrations.py),
  # for the tests that compile runner sources.
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE
    HWTUNE_SCHEMA_LATEST=${HWTUNE_SCHEMA_LATEST} HWTUNE_APPLICATION_ID=${HWTUNE_APPLICATION_ID})
  if(name MATCHES "^test_pool")
    target_link_libraries(${name} PRIVATE hwtune_pool_static)
  else()
    # Whole archive: the op registry refers to the op families weakly, and a
    # weak reference alone does not pull an object out of a static archive.
    target_link_libraries(${name} PRIVATE -Wl,--whole-archive hwtune_static
                          -Wl,--no-whole-archive)
  endif()
endforeach()
