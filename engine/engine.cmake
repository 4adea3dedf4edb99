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

# The training ops' point-wise loops select between arms such as dy and
# alpha * dy (relu_grad). Under GCC's default -ftrapping-math a multiply on
# one arm stays conditional (it could raise an FP exception the other arm
# would not), which left relu_grad a scalar loop with a data-dependent
# branch: 12% of PathNet-medium's training step in perf (avx2). No engine
# code reads FP exception flags, and the results are the same bits.
if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/engine/ops/grad_pointwise.c
    ${CMAKE_CURRENT_SOURCE_DIR}/engine/ops/grad_reduce.c PROPERTIES COMPILE_OPTIONS
    -fno-trapping-math)
endif()
