# One compile unit per compiled attention variant (kAttentionVariants, attention_variants.h), so
# that the build compiles the variants' kernels in parallel: attention_variant.cu.in, generated
# once per index into the calling directory's build tree. The count must equal the table's size:
# a unit past the table fails its static_assert, and disentangled_attention.cu checks the count
# it is given (DFLASH_ATTENTION_VARIANT_COUNT).
set(DFLASH_ATTENTION_VARIANT_COUNT 20)
set(DFLASH_ATTENTION_VARIANT_TEMPLATE "${CMAKE_CURRENT_LIST_DIR}/attention_variant.cu.in")

# Adds the generated units to `target`, and the count to its compile definitions.
function(dflash_attention_variant_sources target)
  math(EXPR last "${DFLASH_ATTENTION_VARIANT_COUNT} - 1")
  foreach(DFLASH_ATTENTION_VARIANT RANGE ${last})
    set(unit "${CMAKE_CURRENT_BINARY_DIR}/attention_variant_${DFLASH_ATTENTION_VARIANT}.cu")
    configure_file("${DFLASH_ATTENTION_VARIANT_TEMPLATE}" "${unit}" @ONLY)
    target_sources(${target} PRIVATE "${unit}")
  endforeach()
  target_compile_definitions(${target} PRIVATE
    DFLASH_ATTENTION_VARIANT_COUNT=${DFLASH_ATTENTION_VARIANT_COUNT})
endfunction()
