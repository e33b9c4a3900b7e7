#!/bin/sh
# Regenerates tests/golden/tokenizer/spm.model, the sentencepiece fixture of the tokenizer goldens:
# Debian's spm_train (sentencepiece 0.1.97) on config/demo/corpus.txt in DeBERTa's id layout
# ([PAD] [CLS] [SEP] [UNK] = 0..3). The arguments are those of DFLASH_SPM_TRAIN_ARGS in
# cmake/DflashDemoModel.cmake; keep the two in step. After regenerating, rerun
# make_tokenizer_goldens.py, since every golden id depends on this model.
# Usage: tests/golden/tokenizer/make_spm.sh   (from any directory)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Relative paths inside the scratch directory: spm_train records --input and --model_prefix in the
# model, so this keeps the fixture byte-identical wherever the repository is checked out.
cp "$root/config/demo/corpus.txt" "$work/corpus.txt"
cd "$work"
spm_train --input=corpus.txt --model_prefix=spm \
  --vocab_size=4000 --model_type=unigram --normalization_rule_name=nmt_nfkc \
  --pad_id=0 --bos_id=1 --eos_id=2 --unk_id=3 \
  --pad_piece=[PAD] --bos_piece=[CLS] --eos_piece=[SEP] --unk_piece=[UNK] \
  --num_threads=1 --minloglevel=2
cp "$work/spm.model" "$here/spm.model"
echo "wrote $here/spm.model ($(wc -c < "$here/spm.model") bytes)"
