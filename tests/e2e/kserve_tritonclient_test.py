"""tritonclient (Triton's own Python gRPC client, from PyPI) against dflash-server's KServe v2 front.

Starts the dflash-server binary with the demo model on a free loopback port and drives it with an
unchanged tritonclient: readiness, server and model metadata, model config, ModelInfer for classify
(text pairs) and zero-shot, INVALID_ARGUMENT naming the input, UNIMPLEMENTED for RPCs not served.
Every inference answer is compared with the dflash.v1 answer for the same input, called through
grpcio with message classes built from the API's descriptor set.

Usage: kserve_tritonclient_test.py --server=BIN --config=YAML --model_dir=DIR --protoset=FILE
Exit status 0 when every check passes; a missing tritonclient is a failure, not a skip.
"""

import argparse
import socket
import subprocess
import sys
import time

try:
    import numpy as np
    import tritonclient.grpc as triton
    from tritonclient.utils import InferenceServerException
except ImportError as error:
    sys.exit(f"FAIL: tritonclient is not installed ({error}); scripts/install-deps.sh puts "
             "tritonclient[grpc] into .venv-deploy")
import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

TEXTS = ["A soccer game with multiple males playing.", "The weather is lovely today.", "short"]
PAIRS = ["Some men are playing a sport.", "It is raining.", ""]
CANDIDATES = ["sports", "weather", "politics"]


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class DflashV1:
    """dflash.v1.InferenceService through grpcio, its messages from the descriptor set."""

    def __init__(self, channel, protoset):
        files = descriptor_pb2.FileDescriptorSet()
        with open(protoset, "rb") as f:
            files.ParseFromString(f.read())
        pool = descriptor_pool.DescriptorPool()
        for file in files.file:
            pool.Add(file)
        self.message = lambda name: message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"dflash.v1.{name}"))
        self.channel = channel

    def call(self, method, request):
        response_class = self.message(f"{method}Response")
        stub = self.channel.unary_unary(f"/dflash.v1.InferenceService/{method}",
                                        request_serializer=lambda m: m.SerializeToString(),
                                        response_deserializer=response_class.FromString)
        return stub(request, timeout=30)


def bytes_input(name, values):
    tensor = triton.InferInput(name, [len(values)], "BYTES")
    tensor.set_data_from_numpy(np.array([v.encode() for v in values], dtype=np.object_))
    return tensor


def check_close(actual, expected, what):
    if not np.allclose(actual, expected, rtol=1e-5, atol=1e-6):
        raise AssertionError(f"{what}: KServe {actual} != dflash.v1 {expected}")


def run_checks(client, v1):
    assert client.is_server_live(), "server not live"
    assert client.is_server_ready(), "server not ready"
    assert client.is_model_ready("demo"), "demo not ready"
    assert not client.is_model_ready("no-such-model"), "an unknown model is ready"
    metadata = client.get_server_metadata(as_json=True)
    assert metadata["name"] == "dflash-server", metadata

    model = client.get_model_metadata("demo", as_json=True)
    inputs = {t["name"]: (t["datatype"], [int(d) for d in t["shape"]]) for t in model["inputs"]}
    outputs = {t["name"]: (t["datatype"], [int(d) for d in t["shape"]]) for t in model["outputs"]}
    assert inputs["text"] == ("BYTES", [-1]), inputs
    assert outputs["scores"] == ("FP32", [-1, 3]), outputs
    config = client.get_model_config("demo", as_json=True)["config"]
    info = v1.call("Info", v1.message("InfoRequest")(model="demo"))
    labels = [label.name for label in info.models[0].labels]
    assert config["parameters"]["labels"]["string_value"] == (
        "[" + ",".join(f'"{label}"' for label in labels) + "]"), config["parameters"]

    # Classify: text pairs, scores and logits, against dflash.v1 (default and raw scores).
    result = client.infer("demo", [bytes_input("text", TEXTS), bytes_input("text_pair", PAIRS)],
                          outputs=[triton.InferRequestedOutput("scores"),
                                   triton.InferRequestedOutput("logits")],
                          request_id="tc-1")
    assert result.get_response().id == "tc-1"
    scores, logits = result.as_numpy("scores"), result.as_numpy("logits")
    assert scores.shape == (3, 3) and scores.dtype == np.float32, scores
    request = v1.message("ClassifyRequest")(model="demo")
    for text, pair in zip(TEXTS, PAIRS):
        request.inputs.add(text=text, text_pair=pair)
    for function, tensor in ((0, scores), (3, logits)):  # unspecified (softmax), raw
        request.score_function = function
        expected = np.zeros((3, 3), dtype=np.float32)
        for i, classification in enumerate(v1.call("Classify", request).results):
            for label in classification.scores:
                expected[i, label.id] = label.score
        check_close(tensor, expected, f"classify (score function {function})")

    # Zero-shot, with a request parameter.
    result = client.infer("demo", [bytes_input("text", TEXTS),
                                   bytes_input("candidate_labels", CANDIDATES)],
                          parameters={"multi_label": True})
    zero_shot = v1.message("ZeroShotRequest")(model="demo", texts=TEXTS,
                                              candidate_labels=CANDIDATES, multi_label=True)
    expected = np.zeros((3, 3), dtype=np.float32)
    for i, answer in enumerate(v1.call("ZeroShot", zero_shot).results):
        for label in answer.scores:
            expected[i, label.id] = label.score
    check_close(result.as_numpy("candidate_scores"), expected, "zero-shot")

    # A wrong datatype: INVALID_ARGUMENT naming the input.
    wrong = triton.InferInput("text", [2], "FP32")
    wrong.set_data_from_numpy(np.zeros(2, dtype=np.float32))
    try:
        client.infer("demo", [wrong])
        raise AssertionError("an FP32 text was accepted")
    except InferenceServerException as error:
        assert error.status() == "StatusCode.INVALID_ARGUMENT", error.status()
        assert "input 'text'" in error.message(), error.message()
    # A protocol RPC the server does not serve.
    try:
        client.get_inference_statistics("demo")
        raise AssertionError("statistics answered")
    except InferenceServerException as error:
        assert error.status() == "StatusCode.UNIMPLEMENTED", error.status()


def main():
    parser = argparse.ArgumentParser()
    for flag in ("server", "config", "model_dir", "protoset"):
        parser.add_argument(f"--{flag}", required=True)
    args = parser.parse_args()
    port = free_port()
    address = f"127.0.0.1:{port}"
    server = subprocess.Popen(
        # One BLAS thread: OpenBLAS's own threads are invisible to the ThreadSanitizer build.
        [args.server, f"--config={args.config}",
         f"--set=models.demo.path={args.model_dir},models.demo.cpu_threads=1",
         f"--listen={address}", "--metrics_listen=off", "--backend=cpu"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        client = triton.InferenceServerClient(address)
        for _ in range(240):
            if server.poll() is not None:
                sys.exit(f"FAIL: dflash-server exited:\n{server.stderr.read()}")
            try:
                if client.is_server_ready():
                    break
            except InferenceServerException:
                pass
            time.sleep(0.5)
        else:
            sys.exit("FAIL: the server never became ready")
        with grpc.insecure_channel(address) as channel:
            run_checks(client, DflashV1(channel, args.protoset))
    finally:
        server.terminate()
        server.wait(timeout=60)
    print("kserve_tritonclient_test: all checks passed")


if __name__ == "__main__":
    main()
