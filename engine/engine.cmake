# Engine sources: thread pool, measurement loops. A file whose name contains
# "omp" is the OpenMP comparison point only: it gets OpenMP's flags and
# HWTUNE_HAVE_OPENMP when OpenMP exists, and builds its fallback otherwise.
file(GLOB HWTUNE_ENGINE_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/engine/*/*.c)
set(HWTUNE_EXTRA_LIBS "")
find_package(OpenMP COMPONENTS C)
foreach(src ${HWTUNE_ENGINE_SOURCES})
  get_filename_component(name ${src} NAME)
  if(name MATCHES "omp" AND OpenMP_C_FOUND)
    set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${OpenMP_C_FLAGS}"
      COMPILE_DEFINITIONS "HWTUNE_HAVE_OPENMP=1")
    list(APPEND HWTUNE_EXTRA_LIBS OpenMP::OpenMP_C)
  endif()
endforeach()
