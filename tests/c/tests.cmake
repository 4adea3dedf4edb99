# C test programs: every tests/c/test_*.c is a standalone program that exits 0
# on success. Built against the library sources directly (static), so the
# sanitizer builds instrument kernels and engine alike.
file(GLOB HWTUNE_C_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tests/c/test_*.c)
add_library(hwtune_static STATIC ${HWTUNE_KERNEL_SOURCES} ${HWTUNE_ENGINE_SOURCES})
target_include_directories(hwtune_static PUBLIC kernels/include engine/include)
target_compile_options(hwtune_static PRIVATE ${HWTUNE_WARN})
target_compile_definitions(hwtune_static PRIVATE _GNU_SOURCE)
target_link_libraries(hwtune_static PUBLIC Threads::Threads m ${HWTUNE_EXTRA_LIBS})
foreach(src ${HWTUNE_C_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(${name} ${src})
  target_compile_options(${name} PRIVATE ${HWTUNE_WARN})
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE)
  target_link_libraries(${name} PRIVATE hwtune_static)
endforeach()
