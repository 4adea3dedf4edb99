# Kernel sources: one folder per op family.
#
# A family's vector body is written once over kernels/common/vec.h and listed
# below with the ISA variants it is compiled for: the build compiles the same
# file once per variant, with that ISA's flags and HWT_VEC_<ISA> (vec.h maps
# its vector vocabulary and names the exported row of the family's variant
# table). Runtime CPUID dispatch picks the row.
#
# Other files are portable C, compiled once, except those whose name contains
# "avx512" or "avx2" (GEMM's micro-kernels, one register tile per ISA), compiled
# with that ISA's flags;
# all of them are only ever called after runtime dispatch.
# Portable loops are a handful of instructions: aligned to 32 bytes so that
# none straddles a 64-byte line (the add loop did, and ran at 0.8x of the
# per-ISA-file build in an interleaved A/B on a Zen 3; aligned, 1.0x).
set(HWTUNE_ISA_FLAGS_generic -falign-loops=32)
set(HWTUNE_ISA_FLAGS_avx2 -mavx2 -mfma -mf16c)
set(HWTUNE_ISA_FLAGS_avx512 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c)

set(HWTUNE_KERNEL_BODIES
  "kernels/eltwise/body.c generic avx2 avx512"
  "kernels/probe/body.c generic avx2 avx512"
  "kernels/pool/body.c generic avx2 avx512"
  "kernels/norm/body.c generic avx2 avx512"
  "kernels/conv/nchwc_body.c avx2 avx512"  # generic: nchwc_generic.c (accumulators in memory)
  "kernels/conv/winograd_body.c generic avx2 avx512"
  "kernels/conv/dw_body.c generic avx2 avx512"
  "kernels/conv/stem_body.c generic avx2 avx512"
  "kernels/gemm/pack_body.c generic avx2 avx512"
  "kernels/gemm/gemv_body.c generic avx2 avx512"
  "kernels/rnn/cell_body.c generic avx2 avx512"
  "kernels/qgemm/body.c generic avx2 avx512"  # int8 GEMM (issue #43)
  "kernels/qadd/body.c generic avx2 avx512"  # quantized residual add (issue #43)
  "kernels/qdw/body.c generic avx2 avx512"  # depthwise int8 conv on u8 channels-last (issue #43)
)

if(HWTUNE_X86)
  add_compile_definitions(HWTUNE_HAVE_X86=1)
endif()

set(HWTUNE_KERNEL_SOURCES "")
set(HWTUNE_KERNEL_BODY_FILES "")
foreach(entry ${HWTUNE_KERNEL_BODIES})
  separate_arguments(entry)
  list(POP_FRONT entry body)
  list(APPEND HWTUNE_KERNEL_BODY_FILES ${CMAKE_CURRENT_SOURCE_DIR}/${body})
  string(REGEX REPLACE "^kernels/|\\.c$" "" tag ${body})
  string(REPLACE "/" "_" tag ${tag})
  foreach(isa ${entry})
    if(NOT isa STREQUAL "generic" AND NOT HWTUNE_X86)
      continue()
    endif()
    string(TOUPPER ${isa} ISA)
    set(target hwtune_k_${tag}_${isa})
    add_library(${target} OBJECT ${CMAKE_CURRENT_SOURCE_DIR}/${body})
    target_include_directories(${target} PRIVATE kernels/include engine/include)
    target_compile_options(${target} PRIVATE ${HWTUNE_WARN} ${HWTUNE_ISA_FLAGS_${isa}})
    # Sanitizer builds instrument only the variants the test host can run
    # (HWTUNE_SANITIZE_ISAS, set by tests/test_c_suite.py from the host's
    # CPU). The others still compile, with warnings as errors, but never
    # execute there: unoptimised and without debug info, as they were a
    # third of the ASan/UBSan build (the avx512 bodies: 604 of 1637
    # compile-seconds in .ninja_log on a 2-vCPU Zen 1 without AVX-512; the
    # avx512 CONV body alone took 94 s at -O1 -g, 31 s at -O0 -g0).
    if(HWTUNE_SANITIZE AND HWTUNE_SANITIZE_ISAS AND NOT isa IN_LIST HWTUNE_SANITIZE_ISAS)
      target_compile_options(${target} PRIVATE -fno-sanitize=all -O0 -g0)
    endif()
    target_compile_definitions(${target} PRIVATE _GNU_SOURCE HWTUNE_BUILDING
                               HWT_VEC_${ISA}=1)
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON
                          C_VISIBILITY_PRESET hidden)
    list(APPEND HWTUNE_KERNEL_SOURCES $<TARGET_OBJECTS:${target}>)
  endforeach()
endforeach()

file(GLOB HWTUNE_KERNEL_ALL CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/kernels/*/*.c)
list(REMOVE_ITEM HWTUNE_KERNEL_ALL ${HWTUNE_KERNEL_BODY_FILES})
foreach(src ${HWTUNE_KERNEL_ALL})
  get_filename_component(name ${src} NAME)
  if(name MATCHES "avx512")
    if(HWTUNE_X86)
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${HWTUNE_ISA_FLAGS_avx512}")
      list(APPEND HWTUNE_KERNEL_SOURCES ${src})
    endif()
  elseif(name MATCHES "avx2")
    if(HWTUNE_X86)
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${HWTUNE_ISA_FLAGS_avx2}")
      list(APPEND HWTUNE_KERNEL_SOURCES ${src})
    endif()
  else()
    list(APPEND HWTUNE_KERNEL_SOURCES ${src})
  endif()
endforeach()
