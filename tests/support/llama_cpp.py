"""llama.cpp's own OpenAI-compatible server (``llama-server``), built for the tests, and the suite's
tiny Llama written for it as GGUF: a second engine, of another family than ``transformers serve``
(C++ on ggml, its own tokenizer, scheduler, prefix cache and Prometheus ``/metrics``).

Where it comes from: PyPI serves llama.cpp only as source, inside the sdist of
``llama-cpp-python`` (``vendor/llama.cpp``, the commit its CHANGELOG names). ``pip download``
fetches that sdist, and CMake builds one target of it, ``llama-server``, with the machine's C++
compiler; the same sdist's ``gguf-py`` writes the model, so the writer and the reader are of one
version. Nothing else is downloaded (no prebuilt web UI, no model): the build is configured with
``LLAMA_USE_PREBUILT_UI=OFF`` and ``LLAMA_OPENSSL=OFF``.

The build is kept in a folder the caller gives (the tests use pytest's cache), under a lock, so
that a second run, or a second test process, reuses it; the seconds each stage took are written
beside it (``build-times.json``) and printed by the tests.

Why the build can be unavailable, each one line (:class:`Unavailable`): no ``cmake`` or C++
compiler on the machine, or the sdist cannot be downloaded (no registry). A build that starts and
fails is not "unavailable": it raises :class:`BuildFailed` with the log's last lines.

The model is the one ``inference.serving``'s ``build_model`` writes for ``transformers serve``
(:class:`perfsuite.workloads.inference.serving.model.ModelShape`, same seed, same weights), in
llama.cpp's layout: ``q``/``k`` rows permuted for its rotary embedding as llama.cpp's own
converter does, and the word-level vocabulary as a unigram one (``"▁" + word``, the same ids),
so a prompt of N words is N tokens under both engines.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

SDIST = "llama-cpp-python"
SDIST_VERSION = "0.3.36"
LLAMA_CPP_COMMIT = "0c1e57098"  # what that sdist's vendor/llama.cpp is (its CHANGELOG says so)
TARGET = "llama-server"
CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    # -O0, not Release's -O3: the least compile time (-O1 already cost a third less than -O3 on its
    # JSON-heavy sources); the model is tiny, so the server still answers in milliseconds. These
    # tests judge what the records say, not llama.cpp's speed.
    "-DCMAKE_C_FLAGS_RELEASE=-O0 -DNDEBUG",
    "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG",
    "-DLLAMA_USE_PREBUILT_UI=OFF",  # its default downloads the web UI at build time
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DGGML_NATIVE=ON",
)
DOWNLOAD_TIMEOUT_S = 300
CONFIGURE_TIMEOUT_S = 300
BUILD_TIMEOUT_S = 3600  # 2 busy cores: about 20 minutes seen
WORD_PREFIX = "\u2581"  # how a SentencePiece vocabulary marks a word's start


class Unavailable(Exception):
    """This machine cannot build llama-server (a missing tool, or no registry): the reason, one line."""


class BuildFailed(RuntimeError):
    """The build started and failed: its log's last lines."""


@dataclass(frozen=True)
class LlamaServer:
    binary: Path
    gguf_py: Path  # the sdist's gguf-py, the GGUF writer of the same llama.cpp
    times_s: dict  # seconds per stage of the build that made it (download, configure, compile)


def build(folder: Path) -> LlamaServer:
    """``llama-server`` from the sdist, built in ``folder`` once (a second call, from any
    process, waits for the first and reuses it)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = folder / "build-times.json"
        source = folder / f"llama_cpp_python-{SDIST_VERSION}" / "vendor" / "llama.cpp"
        binary = folder / "build" / "bin" / TARGET
        if done.exists() and binary.exists():
            return LlamaServer(binary, source / "gguf-py", json.loads(done.read_text()))
        missing = [tool for tool in ("cmake", "c++") if shutil.which(tool) is None]
        if missing:
            raise Unavailable(f"no {' or '.join(missing)} on PATH to build llama.cpp's llama-server from source")
        times: dict[str, float] = {}
        cpu0 = _children_cpu_s()
        t0 = time.monotonic()
        sdist = _download(folder)
        times["download_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        shutil.rmtree(folder / f"llama_cpp_python-{SDIST_VERSION}", ignore_errors=True)
        with tarfile.open(sdist) as tar:
            tar.extractall(folder, filter="data")
        times["unpack_s"] = round(time.monotonic() - t0, 1)
        options = [*CMAKE_OPTIONS, f"-DLLAMA_BUILD_COMMIT={LLAMA_CPP_COMMIT}"]  # no .git to read it from
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        log = folder / "build.log"
        t0 = time.monotonic()
        _step(["cmake", "-S", str(source), "-B", str(folder / "build"), *generator, *options], log, CONFIGURE_TIMEOUT_S)
        times["configure_s"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        jobs = str(os.cpu_count() or 1)
        _step(["cmake", "--build", str(folder / "build"), "--target", TARGET, "-j", jobs], log, BUILD_TIMEOUT_S)
        times["compile_s"] = round(time.monotonic() - t0, 1)
        times["cpu_s"] = round(_children_cpu_s() - cpu0, 1)  # of every stage: what the build costs a quiet machine
        if not binary.exists():
            raise BuildFailed(f"the build ended without {binary} (log: {log})")
        done.write_text(json.dumps(times))
        return LlamaServer(binary, source / "gguf-py", times)


def _children_cpu_s() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _download(folder: Path) -> Path:
    """The sdist, from the package registry pip is set up for; Unavailable when none answers."""
    found = sorted(folder.glob(f"llama_cpp_python-{SDIST_VERSION}.tar.gz"))
    if found:
        return found[0]
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", SDIST]
    argv += ["-d", str(folder), f"{SDIST}=={SDIST_VERSION}"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise Unavailable(f"pip could not download {SDIST}=={SDIST_VERSION} within {DOWNLOAD_TIMEOUT_S} s") from None
    found = sorted(folder.glob(f"llama_cpp_python-{SDIST_VERSION}.tar.gz"))
    if proc.returncode != 0 or not found:
        lines = proc.stderr.strip().splitlines() or ["no output"]
        last = next((ln for ln in reversed(lines) if ln.startswith("ERROR")), lines[-1])  # not a warning
        raise Unavailable(f"pip could not download {SDIST}=={SDIST_VERSION}'s source: {last}")
    return found[0]


def _step(argv: list[str], log: Path, timeout_s: float) -> None:
    with open(log, "a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        try:
            code = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            code = None
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        why = f"exit {code}" if code is not None else f"not done within {timeout_s:g} s"
        raise BuildFailed(f"{argv[0]} {argv[1]} failed ({why}); the log's end:\n{tail}")


def write_gguf(server: LlamaServer, path: Path, shape=None) -> Path:
    """The suite's built Llama (``ModelShape``: the same weights ``build_model`` writes for
    ``transformers serve``) as a float32 GGUF at ``path``, written with the sdist's gguf-py."""
    import numpy as np

    from perfsuite.workloads.inference.serving.model import SPECIAL, ModelShape
    from perfsuite.workloads.inference.serving.model import weights as model_weights
    from perfsuite.workloads.inference.serving.prompts import WORDS

    shape = shape or ModelShape()
    sys.path.insert(0, str(server.gguf_py))
    try:
        import gguf
    finally:
        sys.path.remove(str(server.gguf_py))
    weights = model_weights(shape)  # what build_model stores for transformers serve

    def rope_rows(w):  # Hugging Face's rotate-half layout to llama.cpp's interleaved pairs (its converter's permute)
        return w.reshape(shape.heads, 2, w.shape[0] // shape.heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("perfsuite tiny llama")
    writer.add_context_length(4096)
    writer.add_embedding_length(shape.hidden)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.intermediate)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.heads)
    writer.add_rope_dimension_count(shape.hidden // shape.heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    # The word-level vocabulary as a unigram one (llama.cpp's "t5" tokenizer: the best cover of the
    # text by whole pieces, no merges needed): [PAD] and [UNK] first, then each word as "▁word",
    # at the ids transformers' tokenizer gives them; no start or end token is added, as the
    # transformers model has none (WordPiece, llama.cpp's "bert", would add two to every prompt).
    writer.add_tokenizer_model("t5")
    writer.add_token_list([*SPECIAL, *(WORD_PREFIX + w for w in WORDS)])
    types = [gguf.TokenType.CONTROL, gguf.TokenType.UNKNOWN] + [gguf.TokenType.NORMAL] * len(WORDS)
    writer.add_token_types(types)
    writer.add_token_scores([0.0] * len(types))
    pad, unk = SPECIAL.index("[PAD]"), SPECIAL.index("[UNK]")
    for add in (writer.add_pad_token_id, writer.add_bos_token_id, writer.add_eos_token_id):
        add(pad)  # llama.cpp wants the ids named; none is ever added to a prompt
    writer.add_unk_token_id(unk)
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(True)
    writer.add_remove_extra_whitespaces(True)
    writer.add_precompiled_charsmap(newline_as_space())
    writer.add_chat_template("{% for m in messages %}{{ m['content'] }} {% endfor %}")
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
    names["lm_head.weight"] = "output.weight"
    per_layer = {
        "input_layernorm": "attn_norm",
        "post_attention_layernorm": "ffn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    for name, w in weights.items():
        if name in names:
            writer.add_tensor(names[name], w)
            continue
        layer, part = name.removeprefix("model.layers.").split(".", 1)
        part = part.removesuffix(".weight")
        if part in ("self_attn.q_proj", "self_attn.k_proj"):
            w = np.ascontiguousarray(rope_rows(w))
        writer.add_tensor(f"blk.{layer}.{per_layer[part]}.weight", w)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def newline_as_space() -> bytes:
    """A unigram tokenizer's normalization map (SentencePiece's precompiled charsmap, as llama.cpp
    reads it) whose one rule turns a newline into a space: multi-turn prompts join their turns
    with newlines, which transformers' whitespace split reads as spaces; without the rule
    llama.cpp would read a newline and the word after it as one unknown token.

    The map is a double array (XCDA) walked from node 0: a byte ``c`` leads from node ``s`` to
    ``base(s) ^ c`` when that node's check byte is ``c``; a leaf's ``base`` leads to the node
    holding the replacement's offset. Root base 16: ``\n`` (10) leads to node 26 (check 10,
    leaf, base 1), whose value node 27 holds offset 0, where ``" \0"`` lies. 512 nodes, so
    that every byte's step from the root or from node 27 stays inside the array."""
    import struct

    nodes = [0] * 512
    nodes[0] = 16 << 10  # root: base 16
    nodes[16 ^ 10] = (1 << 10) | (1 << 8) | 10  # base 1, leaf, check byte "\n"
    nodes[(16 ^ 10) ^ 1] = 0  # the replacement's offset
    array = struct.pack(f"<{len(nodes)}I", *nodes)
    return struct.pack("<I", len(array)) + array + b" \0"


def server_command(server: LlamaServer, model: Path, slots: int = 2) -> str:
    """``inference.serving``'s ``server_command`` for llama-server on ``model``: ``slots``
    requests decoded together (each with its own prompt cache), Prometheus ``/metrics`` on, one
    thread (two cores shared with the client)."""
    return (
        f"{server.binary} -m {model} --host 127.0.0.1 --port {{port}} --parallel {slots} --ctx-size {2048 * slots} "
        "--threads 1 --threads-batch 1 --metrics --no-webui --alias tiny-llama --no-warmup"
    )


if __name__ == "__main__":  # scripts/test.sh starts the build early, beside the rest of the set-up
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".pytest_cache/d") / f"llama-server-{SDIST_VERSION}"
    try:
        print(json.dumps(build(folder).times_s))
    except Unavailable as exc:  # the tests say the same, as their skip reason
        print(f"llama-server not built: {exc}", file=sys.stderr)
        sys.exit(3)
