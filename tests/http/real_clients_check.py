"""Calls a running server's HTTP routes with the real client libraries people use -- openai,
cohere, huggingface_hub and plain requests -- and compares every answer with the dflash.v1 answer
for the same input, given in a JSON file written by the C++ test that started the server
(tests/e2e/http_clients_test.cc).

Usage: real_clients_check.py <base URL> <expected.json>
Prints one line per check and "N passed, M failed"; exit status 0 only when all passed; 3 when a
client library is missing (the caller decides whether that fails).
"""
import base64
import json
import math
import struct
import sys

try:
    import cohere
    import huggingface_hub
    import numpy  # noqa: F401 (huggingface_hub returns embeddings as numpy arrays)
    import openai
    import requests
except ImportError as error:  # The caller tells CI (fail) from a developer machine (skip).
    print(f"missing client library: {error}")
    sys.exit(3)

BASE = sys.argv[1]
EXPECTED = json.load(open(sys.argv[2]))
passed = 0
failed = 0


def close(actual, expected, relative=1e-5, absolute=1e-6):
    return abs(actual - expected) <= relative * abs(expected) + absolute


def check(name, condition, detail=""):
    global passed, failed
    if condition:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")


def vectors_equal(actual, expected):
    return len(actual) == len(expected) and all(
        close(a, e) for row_a, row_e in zip(actual, expected) for a, e in zip(row_a, row_e)) and all(
            len(a) == len(e) for a, e in zip(actual, expected))


embed = EXPECTED["embed"]  # {"inputs": [...], "vectors": [[...]], "tokens": n}
classify = EXPECTED["classify"]  # {"text": ..., "scores": [{"label", "score"}]}
rerank = EXPECTED["rerank"]  # {"query", "documents", "results": [{"index", "score", "document"}]}
tokenize = EXPECTED["tokenize"]  # {"text", "tokens": [{"id", "special", "start", "end"}]}

# openai: embeddings.create, the client's default (base64) and float.
client = openai.OpenAI(base_url=f"{BASE}/v1", api_key="unused", max_retries=0)
answer = client.embeddings.create(model="embed", input=embed["inputs"])
check("openai embeddings (base64 default)",
      vectors_equal([item.embedding for item in answer.data], embed["vectors"]))
check("openai usage", answer.usage.prompt_tokens == embed["tokens"], answer.usage)
check("openai model", answer.model == "embed", answer.model)
answer = client.embeddings.create(model="embed", input=embed["inputs"][0], encoding_format="float")
check("openai embeddings (float)", vectors_equal([answer.data[0].embedding], embed["vectors"][:1]))
# Token-id input: the texts' model input ids embed as the texts do, and usage counts them.
answer = client.embeddings.create(model="embed", input=embed["ids"])
check("openai embeddings (token-id lists)",
      vectors_equal([item.embedding for item in answer.data], embed["vectors"]))
check("openai usage of token ids",
      answer.usage.prompt_tokens == sum(len(ids) for ids in embed["ids"]), answer.usage)
answer = client.embeddings.create(model="embed", input=embed["ids"][0], encoding_format="float")
check("openai embeddings (one token-id list)",
      vectors_equal([answer.data[0].embedding], embed["vectors"][:1]))
models = client.models.list()
check("openai models.list", [m.id for m in models.data] == EXPECTED["models"],
      [m.id for m in models.data])
try:
    client.embeddings.create(model="no-such-model", input="x")
    check("openai unknown model raises NotFoundError", False)
except openai.NotFoundError as error:
    check("openai unknown model raises NotFoundError", "no-such-model" in str(error), error)

# cohere: v1 and v2 rerank.
co = cohere.Client(base_url=BASE, api_key="unused")
result = co.rerank(model="rerank", query=rerank["query"], documents=rerank["documents"], top_n=2,
                   return_documents=True)
check("cohere v1 rerank", [(r.index, r.document.text) for r in result.results] ==
      [(r["index"], r["document"]) for r in rerank["results"][:2]] and all(
          close(r.relevance_score, e["score"]) for r, e in zip(result.results, rerank["results"])))
co2 = cohere.ClientV2(base_url=BASE, api_key="unused")
result = co2.rerank(model="rerank", query=rerank["query"], documents=rerank["documents"])
check("cohere v2 rerank", [r.index for r in result.results] ==
      [r["index"] for r in rerank["results"]] and all(
          close(r.relevance_score, e["score"]) for r, e in zip(result.results, rerank["results"])))

# huggingface_hub: InferenceClient against the TEI routes (a model URL: / dispatches by task).
hub = huggingface_hub.InferenceClient(model=f"{BASE}/models/demo")
labels = hub.text_classification(classify["text"])
check("huggingface_hub text_classification",
      [item.label for item in labels] == [s["label"] for s in classify["scores"]] and all(
          close(item.score, s["score"]) for item, s in zip(labels, classify["scores"])), labels)
hub = huggingface_hub.InferenceClient(model=f"{BASE}/models/embed")
features = hub.feature_extraction(embed["inputs"][0])
check("huggingface_hub feature_extraction",
      vectors_equal(features.tolist(), embed["vectors"][:1]), features.shape)

# requests: every TEI route.
session = requests.Session()
response = session.get(f"{BASE}/health")
check("requests /health", response.status_code == 200, response.status_code)
info = session.get(f"{BASE}/info").json()
check("requests /info", info["model_id"] == EXPECTED["models"][0] and
      "classifier" in info["model_type"], info)
scores = session.post(f"{BASE}/predict", json={"inputs": classify["text"]}).json()
check("requests /predict", [s["label"] for s in scores] == [s["label"] for s in classify["scores"]]
      and all(close(a["score"], e["score"]) for a, e in zip(scores, classify["scores"])), scores)
vectors = session.post(f"{BASE}/models/embed/embed", json={"inputs": embed["inputs"]}).json()
check("requests /embed", vectors_equal(vectors, embed["vectors"]))
vectors = session.post(f"{BASE}/embed", json={"inputs": embed["inputs"], "model": "embed"}).json()
check("requests /embed with a model field", vectors_equal(vectors, embed["vectors"]))
ranks = session.post(f"{BASE}/models/rerank/rerank",
                     json={"query": rerank["query"], "texts": rerank["documents"],
                           "return_text": True}).json()
check("requests /rerank", [(r["index"], r["text"]) for r in ranks] ==
      [(r["index"], r["document"]) for r in rerank["results"]] and all(
          close(a["score"], e["score"]) for a, e in zip(ranks, rerank["results"])), ranks)
tokens = session.post(f"{BASE}/tokenize", json={"inputs": tokenize["text"]}).json()[0]
check("requests /tokenize", [(t["id"], t["special"], t["start"]) for t in tokens] ==
      [(t["id"], t["special"], None if t["special"] else t["start"]) for t in tokenize["tokens"]],
      tokens)
vectors = session.post(f"{BASE}/models/embed/embed", json={"inputs": embed["ids"]}).json()
check("requests /embed with token ids", vectors_equal(vectors, embed["vectors"]))
texts = session.post(f"{BASE}/models/embed/decode", json={"ids": embed["ids"]}).json()
check("requests /decode", texts == embed["inputs"], texts)
vectors = session.post(f"{BASE}/models/embed", json={"inputs": embed["inputs"][0]}).json()
check("requests / (embedding model)", vectors_equal(vectors, embed["vectors"][:1]))
scores = session.post(f"{BASE}/invocations", json={"inputs": classify["text"]}).json()
check("requests /invocations (classifier)",
      all(close(a["score"], e["score"]) for a, e in zip(scores, classify["scores"])), scores)
response = session.post(f"{BASE}/predict", json={"inputs": []})
check("requests /predict empty inputs: 400 Empty",
      response.status_code == 400 and response.json()["error_type"] == "Empty", response.text)
response = session.post(f"{BASE}/predict", data="{")
check("requests malformed JSON: 400", response.status_code == 400, response.text)

print(f"{passed} passed, {failed} failed")
sys.exit(0 if failed == 0 else 1)
