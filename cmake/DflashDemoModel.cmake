# The bundled demo checkpoint, generated at build time with no download: a sentencepiece
# tokenizer trained by Debian's spm_train on config/demo/corpus.txt in DeBERTa's id layout
# ([PAD] [CLS] [SEP] [UNK] = 0..3; [MASK] = piece count), and random weights from a fixed seed.
set(DFLASH_DEMO_MODEL_DIR "${PROJECT_BINARY_DIR}/demo-model" CACHE INTERNAL "")
set(demo_spm_prefix "${PROJECT_BINARY_DIR}/demo-tokenizer/spm")
set(demo_corpus "${PROJECT_SOURCE_DIR}/config/demo/corpus.txt")

# Shared by the golden-tokenizer recipe (tests/golden/tokenizer/make_spm.sh): keep in step.
set(DFLASH_SPM_TRAIN_ARGS
  --vocab_size=4000 --model_type=unigram --normalization_rule_name=nmt_nfkc
  --pad_id=0 --bos_id=1 --eos_id=2 --unk_id=3
  --pad_piece=[PAD] --bos_piece=[CLS] --eos_piece=[SEP] --unk_piece=[UNK]
  --num_threads=1 --minloglevel=2)

add_custom_command(
  OUTPUT "${demo_spm_prefix}.model"
  COMMAND ${CMAKE_COMMAND} -E make_directory "${PROJECT_BINARY_DIR}/demo-tokenizer"
  COMMAND ${SPM_TRAIN} --input=${demo_corpus} --model_prefix=${demo_spm_prefix} ${DFLASH_SPM_TRAIN_ARGS}
  DEPENDS "${demo_corpus}"
  COMMENT "Training the demo tokenizer (spm_train, 4000 pieces)"
  VERBATIM)

add_custom_command(
  OUTPUT "${DFLASH_DEMO_MODEL_DIR}/model.safetensors"
  COMMAND dflash-make-demo-model --out_dir=${DFLASH_DEMO_MODEL_DIR} --spm_model=${demo_spm_prefix}.model
  DEPENDS dflash-make-demo-model "${demo_spm_prefix}.model"
  COMMENT "Generating the random-weight demo model in ${DFLASH_DEMO_MODEL_DIR}"
  VERBATIM)

add_custom_target(demo_model ALL DEPENDS "${DFLASH_DEMO_MODEL_DIR}/model.safetensors")
