"""The pure parts of the recap task and the records' provenance (issue 45):
tools/chain_task.py (prompts, recap parsing, scoring), tools/recap_summary.py
(its tables) and tools/eval_provenance.py (resolved KV options, one binary per
records file). Needs neither reasoning_gym nor grpc nor a model nor a server."""
import json
import os
import subprocess
import sys
import tempfile

SRC = os.environ.get("BEACON_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "tools"))
import chain_task  # noqa: E402
import eval_provenance as prov  # noqa: E402
import reasoning_eval as rev  # noqa: E402
import recap_summary  # noqa: E402

QUESTIONS = ["Tom has 3 apples and buys 4 more. How many?", "A box holds 12 pens. How many in 5 boxes?",
             "Sara reads 20 pages a day. How many in a week?"]


def test_no_heavy_imports():
    assert "reasoning_gym" not in sys.modules and "grpc" not in sys.modules


def test_prompt_is_deterministic_and_complete():
    assert chain_task.INSTRUCTION == chain_task.PROMPTS[chain_task.DEFAULT_PROMPT]
    for name, instruction in chain_task.PROMPTS.items():  # each names the recap's format
        assert "RECAP: N1; N2; N3" in chain_task.build_prompt(QUESTIONS, instruction), name
    a = chain_task.build_prompt(QUESTIONS)
    assert a == chain_task.build_prompt(list(QUESTIONS)), "same questions, same prompt"
    assert a.startswith("Problem 1:\nTom has 3 apples")
    for i, q in enumerate(QUESTIONS):
        assert f"Problem {i + 1}:\n{q}" in a
    assert a.index("Problem 1:") < a.index("Problem 2:") < a.index("Problem 3:") < a.index("Solve the 3 problems")
    assert a.rstrip().endswith("RECAP: N1; N2; N3"), a
    assert "RECAP: N1; N2; ...; N6" in chain_task.build_prompt(QUESTIONS * 2)
    assert chain_task.build_prompt(QUESTIONS[::-1]) != a
    # Chains take consecutive dataset indices: fixed by (seed, k, chain) alone.
    assert chain_task.chain_indices(0, 3) == [0, 1, 2] and chain_task.chain_indices(2, 4) == [8, 9, 10, 11]


def test_prompt_of_a_seed_is_stable_across_processes():
    # The prompt of chain 1 (k = 2) of a seed's problems is the same in a fresh interpreter (no hash
    # order, no clock): reasoning_gym is stood in for by fixed questions.
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import chain_task as c; "
            "print(c.build_prompt([q for q in sys.argv[2:]][2:4]))")
    args = [sys.executable, "-c", code, os.path.join(SRC, "tools"), *(QUESTIONS + ["Four 4s?"])]
    runs = {subprocess.run(args, capture_output=True, text=True, check=True,
                           env=dict(os.environ, PYTHONHASHSEED=str(s))).stdout for s in (1, 2)}
    assert len(runs) == 1 and "Problem 2:\nFour 4s?" in runs.pop()


def test_parse_recap_well_formed():
    text = "Problem 1\n3 + 4 = 7\nAnswer 1: 7\n...\nRECAP: 7; 60; 140"
    assert chain_task.parse_recap(text) == (True, ["7", "60", "140"])
    # Markdown, commas in thousands, units, currency, labels, a trailing semicolon.
    assert chain_task.parse_recap("**RECAP:** $1,200; 7 pens; -3.50;") == (True, ["1200", "7", "-3.5"])
    assert chain_task.parse_recap("RECAP: N1 = 12; N2 = 7; 5 + 3 = 8")[1] == ["12", "7", "8"]
    assert chain_task.parse_recap("RECAP: 1) 12; 2) 7; (3) 30")[1] == ["12", "7", "30"]
    assert chain_task.parse_recap("RECAP: 1.5; \\boxed{4}")[1] == ["1.5", "4"]
    # The last recap line wins; "Let me recap:" in prose is none.
    assert chain_task.parse_recap("RECAP: 1; 2; 3\nWait.\nRECAP: 1; 2; 4")[1] == ["1", "2", "4"]
    assert chain_task.parse_recap("Let me recap: 5 and 6.") == (False, [])


def test_parse_recap_other_separators_and_lines():
    assert chain_task.parse_recap("RECAP: 12, 7, 1,200")[1] == ["12", "7", "1200"]
    assert chain_task.parse_recap("RECAP: 12 7 30")[1] == ["12", "7", "30"]
    assert chain_task.parse_recap("RECAP: [12; 7; 30]")[1] == ["12", "7", "30"]
    assert chain_task.parse_recap("RECAP:\n12; 7; 30\n")[1] == ["12", "7", "30"]
    assert chain_task.parse_recap("RECAP:\n1. 12\n2. 7\n3. 30\n\nDone.")[1] == ["12", "7", "30"]


def test_parse_recap_missing_and_extra_entries():
    assert chain_task.parse_recap("RECAP: 12; ; 30")[1] == ["12", None, "30"]
    assert chain_task.parse_recap("RECAP: 12; unknown; 30")[1] == ["12", None, "30"]
    assert chain_task.parse_recap("RECAP: 12; 7")[1] == ["12", "7"]
    assert chain_task.parse_recap("RECAP: 12; 7; 30; 44")[1] == ["12", "7", "30", "44"]
    assert chain_task.parse_recap("no recap here, 12 7 30") == (False, [])
    assert chain_task.parse_recap("") == (False, []) and chain_task.parse_recap(None) == (False, [])


def test_parse_inline_answers():
    text = "Problem 1\nAnswer 1: 7\nProblem 2\n**Answer 2:** $60\nAnswer 2: 61\nAnswer 9: 5\n"
    assert chain_task.parse_inline(text, 3) == ["7", "61", None]


def test_score_chain():
    golds = [7, 60, "140"]
    s = chain_task.score_chain(golds, "Answer 1: 7\nAnswer 2: 60\nAnswer 3: 140\nRECAP: 7; 60; 140", "stop")
    assert s["correct"] and s["n_correct"] == 3 == s["n_in_place"] and s["recap_found"] and s["recap_items"] == 3
    assert [a["position"] for a in s["answers"]] == [1, 2, 3]
    assert s["answers"][1] == {"position": 2, "gold": "60", "recap": "60", "matched": 1, "inline": "60",
                               "recalled": True, "correct": True, "in_place": True}
    assert s["recap_entries"] == ["7", "60", "140"]
    # Recalled: the entry matches the chain's own answer, right or wrong; skipped: not recalled.
    s = chain_task.score_chain(golds, "Answer 1: 8\nAnswer 2: 60\nAnswer 3: 140\nRECAP: 8; 140", "stop")
    assert [(a["recalled"], a["correct"]) for a in s["answers"]] == [(True, False), (False, False), (True, True)]
    # A wrong entry; a missing last one.
    assert [a["correct"] for a in chain_task.score_chain(golds, "RECAP: 7; 61; 140", "stop")["answers"]] == \
        [True, False, True]
    s = chain_task.score_chain(golds, "RECAP: 7; 60", "stop")
    assert [a["correct"] for a in s["answers"]] == [True, True, False] and not s["correct"]
    assert s["answers"][2]["recap"] is None and s["answers"][2]["matched"] is None
    # An extra entry in front: matched in order, every answer right, none in place.
    s = chain_task.score_chain(golds, "RECAP: 5; 7; 60; 140", "stop")
    assert s["n_correct"] == 3 and s["n_in_place"] == 0 and s["recap_items"] == 4
    assert [a["matched"] for a in s["answers"]] == [1, 2, 3]
    # A skipped entry costs that answer only (in place, every later one).
    s = chain_task.score_chain([7, 60, 140, 9], "RECAP: 7; 140; 9", "stop")
    assert [a["correct"] for a in s["answers"]] == [True, False, True, True] and s["n_in_place"] == 1
    # Equal answers: matched in order, each entry once.
    s = chain_task.score_chain([64, 3, 64], "RECAP: 64; 64", "stop")
    assert [a["matched"] for a in s["answers"]] == [0, None, 1]
    # Out of order: the longest in-order match only.
    assert chain_task.score_chain([1, 2, 3], "RECAP: 3; 2; 1", "stop")["n_correct"] == 1
    # More than 2k entries: read in place only.
    s = chain_task.score_chain([1, 2], "RECAP: 5; 1; 2; 3; 4", "stop")
    assert s["n_correct"] == 0 and s["recap_items"] == 5
    assert chain_task.score_chain([1, 2], "RECAP: 1; 9; 9; 9; 9", "stop")["n_correct"] == 1
    # No recap line: every answer is wrong, even with every inline answer right.
    s = chain_task.score_chain(golds, "Answer 1: 7\nAnswer 2: 60\nAnswer 3: 140", "stop")
    assert s["n_correct"] == 0 and not s["recap_found"] and [a["inline"] for a in s["answers"]] == ["7", "60", "140"]
    # Cut at max_tokens: wrong, whatever it wrote.
    s = chain_task.score_chain(golds, "RECAP: 7; 60; 140", "length")
    assert s["n_correct"] == 0 == s["n_in_place"] and not s["correct"] and s["recap_found"]


def test_rescore():
    old = {"answers": [{"position": 1, "gold": "7", "recap": "5", "correct": False},
                       {"position": 2, "gold": "60", "recap": "7", "correct": False}],
           "text": "RECAP: 5; 7; 60", "finish_reason": "stop", "correct": False, "n_correct": 0, "policy": "full"}
    new = chain_task.rescore(old)
    assert new["n_correct"] == 2 and new["correct"] and new["policy"] == "full" and new["n_in_place"] == 0
    assert old["n_correct"] == 0, "the input is not changed"


def _chain(policy, budget, index, correct, k=4, tokens=1200, finish="stop", inline=None):
    answers = [{"position": p + 1, "gold": str(p), "recap": str(p) if correct[p] else "99",
                "inline": str(p) if inline is None else inline[p], "correct": correct[p],
                "in_place": correct[p] and p != 0} for p in range(k)]
    return {"model": "m.gguf", "family": "gsm_symbolic", "seed": 1, "task": "recap", "k": k, "prompt": "brief",
            "index": index,
            "policy": policy, "budget": budget, "interval": 0 if policy == "full" else 16, "max_tokens": 3000,
            "answers": answers, "correct": all(correct), "n_correct": sum(correct), "recap_found": True,
            "completion_tokens": tokens, "finish_reason": finish, "prompt_tokens": 500,
            "peak_cached_tokens": 1700 if policy == "full" else 600, "evictions": 0 if policy == "full" else 70}


def test_recap_summary():
    full = [_chain("full", 0, i, [True, True, True, i % 2 == 0]) for i in range(10)]
    # beacon loses the early half of chains 0-2 and keeps the late half.
    beacon = [_chain("beacon", 128, i, [i >= 3, i >= 3, True, i % 2 == 0]) for i in range(10)]
    h2o = [_chain("h2o", 128, i, [False] * 4, finish="length") for i in range(10)]
    h2o[0]["recap_found"] = False  # no recap line: its entries are not counted as recalled or not
    text = recap_summary.summarize_recap(full + beacon + h2o)
    assert "### recap of 4 x gsm_symbolic, seed 1, m.gguf, max_tokens 3000, prompt brief" in text, text
    # Another prompt is another group: its cells never pair with these.
    other = recap_summary.summarize_recap(full + [dict(r, prompt="steps") for r in beacon])
    assert other.count("### recap of 4 x") == 2 and "| beacon | 128 | 16 | default | 40 | 6:0" not in other, other
    assert "| full | - | - | - | 10 | 87.5% (35/40) | 62.5% (25/40) | 50.0% (5/10) | 100.0% (40/40) | 87.5% (35/40) |" \
        in text, text
    assert "| beacon | 128 | 16 | default | 10 | 72.5% (29/40) | 55.0% (22/40) | 30.0% (3/10) |" in text, text
    assert ("| h2o | 128 | 16 | default | 10 | 0.0% (0/40) | 0.0% (0/40) | 0.0% (0/10) | 100.0% (40/40) "
            "| 0.0% (0/36) |") in text, text
    assert "| 100.0% (10/10) | 1 |" in text, text
    # Per answer 6:0 (p = 2/64), per chain 2:0 (chains 0 and 2).
    assert "| beacon | 128 | 16 | default | 40 | 6:0 | 0.031 |" in text and "| 10 | 2:0 | 0.500 |" in text, text
    assert "| beacon | 128 | 16 | default | 70%, 3:0 | 70%, 3:0 | 100%, 0:0 | 50%, 0:0 |" in text, text
    assert "| beacon | h2o | 40 | 29:0 | <0.001 | <0.001 |" in text, text
    # Early half 6:0 (p = 2/64; Holm over beacon's two halves: x2), late half 0:0.
    text = recap_summary.summarize_recap(full + beacon)
    assert "| beacon | 128 | 16 | default | 70.0% (14/20) | 6:0 | 0.062 | 75.0% (15/20) | 0:0 | 1.000 |" in text, text
    assert recap_summary.halves(5) == ({1, 2}, {4, 5}) and recap_summary.halves(1) == (set(), set())


def test_recap_summary_budgets_in_bytes():
    """A byte cell (match "bytes") is a cell of its own, shows the slots its policy kept and the MB it held,
    and pairs with the other byte cells of its N, and with stateless policies' slot cells of that N."""
    full = [_chain("full", 0, i, [True] * 4) for i in range(6)]
    beacon = [dict(_chain("beacon", 288, i, [i < 3] * 4), match="bytes", kv_budget=49, bytes_per_slot=1000,
                   state_bytes=239000) for i in range(6)]
    rkv = [dict(_chain("rkv", 288, i, [i < 5] * 4), match="bytes", kv_budget=264, bytes_per_slot=1000,
                state_bytes=24000) for i in range(6)]
    streaming = [dict(_chain("streaming", 288, i, [True] * 4), bytes_per_slot=1000, state_bytes=0) for i in range(6)]
    text = recap_summary.summarize_recap(full + beacon + rkv + streaming)
    # Peak 600 slots x 1000 bytes + the state: 0.8 MB.
    assert "| beacon (bytes) | 288 | 16 | default | 6 | 50.0% (12/24) |" in text and "| 49 | 0.8 |" in text, text
    assert "Pairs at budget 288 in bytes, interval 16" in text, text
    assert "| beacon (bytes) | rkv (bytes) | 24 | 0:8 |" in text, text
    assert "| streaming | beacon (bytes) | 24 | 12:0 |" in text, text
    # A slot cell with state (beacon at 288 slots) is compared with the byte cells of the same N apart.
    slots = [dict(_chain("beacon", 288, i, [True] * 4), bytes_per_slot=1000, state_bytes=239000) for i in range(6)]
    text = recap_summary.summarize_recap(full + beacon + rkv + slots)
    assert "Across matchings at budget 288" in text and "| beacon | rkv (bytes) | 24 | 4:0 |" in text, text
    assert "| beacon | beacon (bytes) |" not in text, text


def test_summary_text_keeps_the_single_task_apart():
    single = {"model": "m.gguf", "family": "gsm_symbolic", "seed": 1, "index": 0, "policy": "full", "budget": 0,
              "interval": 0, "max_tokens": 1024, "correct": True, "completion_tokens": 100, "finish_reason": "stop",
              "prompt_tokens": 50}
    assert rev.summary_text([single]) == rev.summarize([single]) + "\n\nRecords by binary: not recorded: 1.\n"
    both = rev.summary_text([single, _chain("full", 0, 0, [True] * 4)])
    assert both.startswith(rev.summarize([single])) and "### recap of 4 x" in both
    # A recap record and a single record of the same index and cell key apart (both resume).
    assert rev.record_key(single) != rev.record_key(dict(single, task="recap", k=4))
    # Recap records of two prompts key apart.
    r = _chain("full", 0, 0, [True] * 4)
    assert rev.record_key(r) != rev.record_key(dict(r, prompt="steps"))


def test_resolve_kv_options():
    flags = prov.parse_server_flags(["beacon-serve", "--model", "m", "--threads", "2", "--kv-interval", "16",
                                     "--kv-window=8", "--kv-beacons", "28", "--no-kv-keep-prompt"], env={})
    assert flags == {"kv-interval": "16", "kv-window": "8", "kv-beacons": "28", "kv-keep-prompt": "false"}
    b = prov.resolve_kv_options("beacon", 64, flags)  # the server's own policy: every flag
    assert (b["budget"], b["interval"], b["window"], b["beacons"], b["recent_queries"], b["fps_bound"]) == \
        (64, 16, 8, 28, 4, 16)
    assert b["keep_prompt"] is False and b["beacon_bf16_state"] is True and b["eviction_phase"] == "spread"
    s = prov.resolve_kv_options("snapkv", 32, flags)  # another policy: its published R and pool, the server's window
    assert (s["budget"], s["interval"], s["window"], s["recent_queries"], s["pool_kernel"], s["beacons"]) == \
        (32, 16, 8, 32, 7, 8)
    assert s["keep_prompt"] is False
    assert prov.resolve_kv_options("full", None, flags) == {"policy": "full", "budget": 0}
    # The environment sets what the command line lacks; the command line wins.
    env_flags = prov.parse_server_flags(["--kv-window", "8"], env={"BEACON_KV_WINDOW": "4", "BEACON_KV_SINKS": "2",
                                                                  "BEACON_KV_EVICTION_PHASE": "aligned"})
    o = prov.resolve_kv_options("rkv", 64, env_flags)
    assert (o["window"], o["sinks"], o["recent_queries"], o["eviction_phase"]) == (8, 2, 8, "aligned")
    # A binary's own defaults (defaults_at its commit): one built before issue 45 changed R, K, U.
    old_base = dict(prov.tree_defaults(), recent_queries=16, beacons=16, fps_bound=64)
    b = prov.resolve_kv_options("beacon", 64, {"kv-beacons": "28"}, old_base)
    assert (b["recent_queries"], b["beacons"], b["fps_bound"]) == (16, 28, 64), b


# KvPolicyOptions as kv/policy/kv_policy.h wrote it before issue 45's change of R, K, U (trimmed).
OLD_HEADER = """
struct Other { int32_t budget = 7; };
struct KvPolicyOptions {
  KvPolicyKind policy = KvPolicyKind::kFull;
  int32_t budget = 512;         // slots kept per KV head
  int32_t interval = 128;       // decode steps between evictions
  int32_t eviction_phase = 0;
  int32_t sinks = 4;
  int32_t window = 32;
  bool keep_prompt = true;
  int32_t recent_queries = 16;  // R
  int32_t beacons = 16;         // K
  int32_t fps_bound = 64;       // U
  BeaconFilter beacon_filter = BeaconFilter::kAll;
  bool beacon_prompt_queries = false;
  bool beacon_bf16_state = true;
  bool beacon_group_queries = false;
  float global_threshold = 0.5f;
  int32_t pool_kernel = 1;
  float lambda = 0.1f;
  uint64_t seed = 0;
  static KvPolicyOptions DefaultsFor(KvPolicyKind policy);
};
"""


def test_member_defaults_read_from_the_header():
    old = prov.member_defaults(OLD_HEADER)
    assert old == {"budget": 512, "interval": 128, "sinks": 4, "window": 32, "keep_prompt": True,
                   "recent_queries": 16, "beacons": 16, "fps_bound": 64, "beacon_filter": "all",
                   "beacon_prompt_queries": False, "beacon_bf16_state": True, "beacon_group_queries": False,
                   "global_threshold": 0.5, "pool_kernel": 1, "lambda": 0.1, "seed": 0}, old
    # This checkout's header: BeaconKV's R, K, U since issue 45; the rest as before.
    tree = prov.tree_defaults()
    assert (tree["recent_queries"], tree["beacons"], tree["fps_bound"]) == (4, 8, 16), tree
    assert {k: v for k, v in tree.items() if k not in ("recent_queries", "beacons", "fps_bound")} == \
        {k: v for k, v in old.items() if k not in ("recent_queries", "beacons", "fps_bound")}
    try:
        prov.member_defaults(OLD_HEADER.replace("  int32_t fps_bound = 64;       // U\n", ""))
    except ValueError as e:
        assert "fps_bound" in str(e), e
    else:
        raise AssertionError("a field the parser cannot find must fail")
    # The working tree (a dirty or unknown commit) is read from the file; a commit git cannot show fails.
    assert prov.defaults_at(None, SRC) == tree and prov.defaults_at("abc+dirty", SRC) == tree
    try:
        prov.defaults_at("0" * 40, SRC)
    except ValueError as e:
        assert "0000000" in str(e), e
    else:
        raise AssertionError("an unknown commit must fail")
    # The grid's pinned binary (eval/results/recap-1.5b) was built at 0948606, before the change.
    if subprocess.run(["git", "-C", SRC, "cat-file", "-e", "0948606^{commit}"], capture_output=True).returncode == 0:
        at = prov.defaults_at("0948606", SRC)
        assert (at["recent_queries"], at["beacons"], at["fps_bound"]) == (16, 16, 64), at


def test_check_against_server():
    o = prov.resolve_kv_options("beacon", 64, {"kv-interval": "16"})
    info = {"budget": 512, "interval": 16, "sinks": 4, "window": 32, "keep_prompt": True, "recent_queries": 4,
            "beacons": 8, "fps_bound": 16}
    assert set(prov.check_against_server(o, info)) == {"interval", "sinks", "window", "keep_prompt",
                                                       "recent_queries", "beacons", "fps_bound"}
    # A server older than KvPolicyInfo.fps_bound reports 0: not checked. Another U is a mismatch.
    assert "fps_bound" not in prov.check_against_server(o, dict(info, fps_bound=0))
    for field, value, message in (("fps_bound", 64, "fps_bound 16 vs 64"), ("window", 8, "window 32 vs 8")):
        try:
            prov.check_against_server(o, dict(info, **{field: value}))
        except ValueError as e:
            assert message in str(e), e
        else:
            raise AssertionError(f"a {field} the server does not run must fail")
    assert prov.check_against_server(prov.resolve_kv_options("full", None, {}), info) == []


def test_refuses_a_records_file_of_another_binary():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "records.jsonl")
        assert prov.check_binaries(path, "aaa") is None, "a new file"
        with open(path, "w") as f:
            f.write(json.dumps({"binary_sha256": "aaa"}) + "\n" + json.dumps({"binary_sha256": "aaa"}) + "\n")
        assert prov.check_binaries(path, "aaa") is None, "the same binary"
        msg = prov.check_binaries(path, "bbb")
        assert msg and "aaa: 2 rows" in msg and "bbb" in msg and "--allow-mixed-binaries" in msg, msg
        assert prov.check_binaries(path, "bbb", allow_mixed=True) is None
        with open(path, "a") as f:
            f.write(json.dumps({"index": 3}) + "\n{torn")  # a row from before provenance; a torn line
        msg = prov.check_binaries(path, "aaa")
        assert msg and "none (written before records named their binary): 1 rows" in msg, msg


def test_binary_hash_and_commit_file():
    with tempfile.TemporaryDirectory() as d:
        binary = os.path.join(d, "beacon-serve")
        with open(binary, "wb") as f:
            f.write(b"abc")
        assert prov.sha256_file(binary) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        with open(os.path.join(d, "COMMIT"), "w") as f:
            f.write("2ad2ded\n")
        assert prov.binary_commit(d, SRC) == ("2ad2ded", "COMMIT file")
        assert prov.server_env({"BEACON_KV_WINDOW": "8", "HOME": "/root"}) == {"BEACON_KV_WINDOW": "8"}


if __name__ == "__main__":
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            fn()
    print("chain_task: ok")
