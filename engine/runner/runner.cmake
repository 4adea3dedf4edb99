# hwtune-run: the stand-alone C runner (issue #3). Its sources sit one level
# below engine/runner/ on purpose: engine.cmake globs engine/*/*.c into
# libhwtune.so, and this program's main() must not land in the library.
# SQLite is dlopen'ed at run time (src/sqlite_dyn.c), so the build needs
# neither SQLite headers nor a library to link.
add_executable(hwtune-run
  ${CMAKE_CURRENT_LIST_DIR}/src/hwtune_run.c
  ${CMAKE_CURRENT_LIST_DIR}/src/json.c
  ${CMAKE_CURRENT_LIST_DIR}/src/sqlite_dyn.c
  ${CMAKE_CURRENT_LIST_DIR}/src/weights.c)
target_compile_options(hwtune-run PRIVATE ${HWTUNE_WARN})
target_link_libraries(hwtune-run PRIVATE hwtune ${CMAKE_DL_LIBS} m)
# Installed next to libhwtune.so, so $ORIGIN finds the library wherever the
# wheel is unpacked.
set_target_properties(hwtune-run PROPERTIES INSTALL_RPATH "$ORIGIN")
if(SKBUILD)
  install(TARGETS hwtune-run RUNTIME DESTINATION hwtune/_lib)
endif()
