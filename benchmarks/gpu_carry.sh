#!/usr/bin/env bash
# Assemble in .gpu/ (ignored by git) what benchmarks/gpu_check.py needs on a GPU machine without network whose image
# has Python 3.12 with torch (the lent H100/H200: torch 2.11): wheels of the pinned packages the image lacks or has at
# other versions, the six data files the check reads, and the default model's tokenizer files. Then, there:
#   pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=/tmp/site:$PWD/lib
#   LLMAUDIT_DATA=$PWD/.gpu/data python3 benchmarks/gpu_check.py OUT.json --tokenizer .gpu/tokenizer
# (~30 MB; about 80 s on an H200 at the default slice, model construction included).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DATA=${LLMAUDIT_DATA:?set LLMAUDIT_DATA to the data mirror}
PACKAGES="transformers huggingface_hub tokenizers nnsight pydantic pydantic_core annotated-types typing-inspection
typing_extensions altair narwhals jsonschema jsonschema-specifications referencing rpds-py httpx2 httpcore2 truststore
greenlet websocket-client zstandard"
FILES="llm-steering-audit/datasplits/racial_identity_train.csv llm-steering-audit/eval_data/admissions.json
llm-steering-audit/eval_data/south-german-data.jsonl llm-steering-audit/instructions/gender_identity.txt
unstated-norms/Regard.csv unstated-norms/processed_sst5.tsv"

grep -qx "/.gpu/" .git/info/exclude || echo "/.gpu/" >> .git/info/exclude
mkdir -p .gpu/whl .gpu/tokenizer
pins=$(for p in $PACKAGES; do grep -i "^${p//[-_]/[-_]}==" requirements.txt; done)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 -d .gpu/whl $pins
for f in $FILES; do mkdir -p ".gpu/data/$(dirname "$f")"; cp "$DATA/$f" ".gpu/data/$f"; done
folder=$("$PY" -c "from llmaudit.models.loading.standin import tokenizer_folder; print(tokenizer_folder())")
cp "$folder"/{tokenizer.json,tokenizer_config.json,chat_template.jinja} .gpu/tokenizer/
du -sh .gpu
