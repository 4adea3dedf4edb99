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
# The bodies whose one consumer is the variant table of
# kernels/common/variants.c (one row per ISA). A sanitizer build leaves out
# the rows of the variants the test host cannot run (below).
set(HWTUNE_ROW_BODIES eltwise_body probe_body pool_body norm_body conv_nchwc_body
    conv_winograd_body conv_dw_body conv_stem_body rnn_cell_body)

if(HWTUNE_X86)
  add_compile_definitions(HWTUNE_HAVE_X86=1)
endif()

# Sanitizer builds instrument only the variants the test host can run
# (HWTUNE_SANITIZE_ISAS, set by tests/c_suite_build.py from the host's CPU);
# the others never execute there. Their variant-table rows are not built at
# all (HWTUNE_NO_ROW_<ISA>: variants.c leaves the row empty, which it
# reports as not compiled): they were a third of the ASan/UBSan build (the
# avx512 bodies: 604 of 1637 compile-seconds in .ninja_log on a 2-vCPU Zen 1
# without AVX-512), and compiled uninstrumented at -O1 they still cost 440
# of the ThreadSanitizer build's 1252 compile-seconds on a 2-vCPU Zen 3
# (2026-12-07; NCHWc 179 s, depthwise 142 s, element-wise 115 s). The
# Release build has every row.
set(HWTUNE_UNRUN_ISAS "")
if(HWTUNE_SANITIZE AND HWTUNE_SANITIZE_ISAS)
  foreach(isa avx2 avx512)
    if(NOT isa IN_LIST HWTUNE_SANITIZE_ISAS)
      list(APPEND HWTUNE_UNRUN_ISAS ${isa})
      string(TOUPPER ${isa} ISA)
      add_compile_definitions(HWTUNE_NO_ROW_${ISA}=1)
    endif()
  endforeach()
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
    if(isa IN_LIST HWTUNE_UNRUN_ISAS AND tag IN_LIST HWTUNE_ROW_BODIES)
      continue()
    endif()
    string(TOUPPER ${isa} ISA)
    set(target hwtune_k_${tag}_${isa})
    add_library(${target} OBJECT ${CMAKE_CURRENT_SOURCE_DIR}/${body})
    target_include_directories(${target} PRIVATE kernels/include engine/include)
    target_compile_options(${target} PRIVATE ${HWTUNE_WARN} ${HWTUNE_ISA_FLAGS_${isa}})
    # The other bodies of variants a sanitizer build does not instrument
    # (GEMM packing, int8) compile uninstrumented, without debug info.
    # -O1, not -O0: at -O0 nothing folds the op switch the element-wise
    # body's always-inline helpers inline into every loop of every op, and
    # that one file took over 250 s and 7 GB (55 ops; 2-vCPU Zen 3,
    # 2026-12-07). All avx512 bodies, compile-seconds one at a time on that
    # host: -O1 -g0 111 s, -O0 -g0 over 400 s.
    if(isa IN_LIST HWTUNE_UNRUN_ISAS)
      target_compile_options(${target} PRIVATE -fno-sanitize=all -O1 -g0)
    elseif(HWTUNE_SANITIZE MATCHES "undefined" AND NOT isa STREQUAL "generic")
      # The SIMD bodies keep AddressSanitizer on every load and store and
      # every UBSan check but pointer-overflow (a check on each address
      # computed, in bodies unrolled into hundreds of them). The generic
      # body, the same template at one float a vector, keeps it. Compile
      # seconds, -O1 -g1, 2-vCPU Zen 3 under load (2026-12-07): the avx2
      # depthwise body over 600 s (stopped) with it, 318 s without; the
      # avx2 NCHWc body 50 -> 30 s, the pooling body 33 -> 26 s.
      target_compile_options(${target} PRIVATE -fno-sanitize=pointer-overflow)
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
