"""Tenants apart in the prefix cache (issue 35), end to end on the real server
and default model. A prefix cached by one tenant must not be found by another:
its time to first token would tell whether the other sent that prompt.

- `cache_salt` (vLLM's request field, OpenAI body and gRPC): requests share
  cached blocks only with requests of the same salt; requests without one share
  with each other as before.
- `--prefix-cache-salt-per-key` with several API keys (`--api-key-file`, one per
  line): requests under different keys never share, a key still hits its own.
- Isolation changes what is reused, never what is generated: every tenant gets
  the same greedy tokens for the same prompt.

Reuse is read from usage.prompt_tokens_details.cached_tokens (OpenAI) and
usage.cached_tokens (gRPC), reported on every partition here
(--enable-prompt-tokens-details; test_prefix_cache.py checks the default,
which withholds the shared partition's). Env: BEACON_BIN, BEACON_MODEL, BEACON_SOURCE_DIR.
"""
import os
import sys
import tempfile

import openai

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_util import Server, collect, pb  # noqa: E402

SYSTEM = ("You are a careful assistant for a team that ships reasoning models. Answer in one short sentence. "
          "Rules: be precise, cite the plan you wrote at the start, never invent numbers, say so when unsure. ") * 4
KEYS = ["key-tenant-a", "key-tenant-b"]


def client(srv, key="x"):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{srv.http_port}/v1", api_key=key, max_retries=0, timeout=120)


def ask(c, question="What is a KV cache?", **extra):
    """(cached prompt tokens, answer) of a greedy chat under the full cache."""
    r = c.chat.completions.create(model="default", messages=[{"role": "system", "content": SYSTEM},
                                                             {"role": "user", "content": question}],
                                  max_tokens=16, temperature=0, extra_body={"kv_policy": "full", **extra})
    return r.usage.prompt_tokens_details.cached_tokens, r.choices[0].message.content


def ask_grpc(srv, key=None, **fields):
    req = pb.GenerateRequest(chat=pb.ChatInput(messages=[pb.ChatMessage(role="system", content=SYSTEM),
                                                         pb.ChatMessage(role="user", content="What is a KV cache?")]),
                             stopping=pb.StoppingCriteria(max_tokens=16), sampling=pb.SamplingParams(temperature=0),
                             kv=pb.KvOptions(policy="full"), **fields)
    md = [("authorization", f"Bearer {key}")] if key else None
    _, text, last = collect(srv.stub.Generate(req, timeout=120, metadata=md))
    return last.usage.cached_tokens, text


def salts():
    """cache_salt on a server with the shared cache."""
    with Server("--enable-prompt-tokens-details") as srv:
        c = client(srv)
        cached, want = ask(c)
        assert cached == 0
        assert ask(c)[0] > 0  # no salt: the shared partition hits
        hit, text = ask(c, cache_salt="tenant-1")
        assert hit == 0 and text == want, (hit, text, want)  # another partition: computed again, same answer
        assert ask(c, cache_salt="tenant-1")[0] > 0  # its own blocks now
        assert ask(c, cache_salt="tenant-2")[0] == 0
        assert ask_grpc(srv, cache_salt="tenant-2")[0] > 0  # gRPC and HTTP share a partition's blocks
        hit, text = ask_grpc(srv, cache_salt="tenant-3")
        assert hit == 0 and text == want, (hit, text)
        # A bad salt is refused, naming the field.
        for bad in ("", "s" * 7, "s" * 257):  # empty, guessable (under 8 bytes), too long
            try:
                ask(c, cache_salt=bad)
                raise AssertionError(f"cache_salt {bad[:8]!r} accepted")
            except openai.BadRequestError as e:
                assert "cache_salt" in str(e), e
        try:
            ask(c, cache_salt=7)
            raise AssertionError("a numeric cache_salt was accepted")
        except openai.BadRequestError as e:
            assert "cache_salt" in str(e) and "string" in str(e), e


def per_key(key_file):
    """Each API key is a tenant: by default with two or more keys (issue 46), as --prefix-cache-salt-per-key
    says; --no-prefix-cache-salt-per-key shares the cache between them."""
    with Server("--api-key-file", key_file, "--enable-prompt-tokens-details") as srv:
        a, b = client(srv, KEYS[0]), client(srv, KEYS[1])
        cached, want = ask(a)
        assert cached == 0
        assert ask(a)[0] > 0  # a key hits its own blocks
        hit, text = ask(b)
        assert hit == 0 and text == want, (hit, text)  # never the other key's
        assert ask(b)[0] > 0
        assert ask(a, cache_salt="salt-of-x")[0] == 0  # a salt splits a key's share further
        assert ask_grpc(srv, KEYS[1])[0] > 0  # gRPC: the same tenant as the key's HTTP requests
        assert ask_grpc(srv, KEYS[0], cache_salt="salt-of-x")[0] > 0
        assert ask_grpc(srv, KEYS[1], cache_salt="salt-of-x")[0] == 0
        try:
            ask(client(srv, "key-tenant-c"))
            raise AssertionError("an unknown key was let in")
        except openai.AuthenticationError:
            pass
    # The same keys with the opt-out: one shared cache.
    with Server("--api-key-file", key_file, "--no-prefix-cache-salt-per-key", "--enable-prompt-tokens-details") as srv:
        assert ask(client(srv, KEYS[0]))[0] == 0
        assert ask(client(srv, KEYS[1]))[0] > 0


def main():
    with tempfile.NamedTemporaryFile("w", suffix=".keys", delete=False) as f:
        f.write("# one key per line, a tenant each\n" + "\n".join(KEYS) + "\n\n")
    try:
        salts()
        per_key(f.name)
    finally:
        os.unlink(f.name)
    print("prefix cache tenants: OK")


if __name__ == "__main__":
    main()
