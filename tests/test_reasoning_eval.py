"""The pure parts of tools/reasoning_eval.py (issue 32): answer extraction,
the exact McNemar test, Holm's correction, records and the summary tables.
Needs neither reasoning_gym nor grpc nor a model: the script imports those
only when it runs problems."""
import importlib.util
import json
import os
import sys
import tempfile

SRC = os.environ.get("BEACON_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("reasoning_eval", os.path.join(SRC, "tools", "reasoning_eval.py"))
re_eval = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(re_eval)


def test_module_has_no_heavy_imports():
    assert "reasoning_gym" not in sys.modules
    assert "grpc" not in sys.modules


def test_extract_answer_line_wins():
    text = "Step 1: 12 * 2 = 24.\nStep 2: 24 + 34 = 58.\n\\boxed{57}\nAnswer: 58"
    assert re_eval.extract_answer(text) == ("58", "answer")
    # The last Answer line, not the first.
    assert re_eval.extract_answer("Answer: 3\nWait, recheck.\nAnswer: 4.")[0] == "4"
    # Markdown bold, currency, thousands separators, a trailing period, units.
    assert re_eval.extract_answer("**Answer:** $1,200.")[0] == "1200"
    assert re_eval.extract_answer("Answer: 70 students")[0] == "70"
    assert re_eval.extract_answer("The final answer: 12.50")[0] == "12.5"
    assert re_eval.extract_answer("Answer: 5 + 3 = 8")[0] == "8"
    assert re_eval.extract_answer("Answer: -7")[0] == "-7"
    assert re_eval.extract_answer("Answer: \\boxed{3 \\times 5 = 15}")[0] == "15"
    assert re_eval.extract_answer("Answer:\n42\n")[0] == "42"


def test_extract_boxed_then_last_number():
    assert re_eval.extract_answer("so 2+2 = 4, \\boxed{4} and \\boxed{5}") == ("5", "boxed")
    assert re_eval.extract_answer("total \\boxed{\\text{1,234}} dollars") == ("1234", "boxed")
    assert re_eval.extract_answer("We get 10, then 20, and finally 30.") == ("30", "last_number")
    assert re_eval.extract_answer("no digits here") == (None, "none")
    assert re_eval.extract_answer(None) == (None, "none")
    # Non-numeric families keep the answer's text.
    assert re_eval.extract_answer("Answer: **blue**.", numeric=False) == ("blue", "answer")
    assert re_eval.extract_answer("so \\boxed{a, b}", numeric=False) == ("a, b", "boxed")


def test_boxed_contents_balances_braces():
    assert re_eval.boxed_contents("\\boxed{\\frac{1}{2}} x \\boxed{7}") == ["\\frac{1}{2}", "7"]
    assert re_eval.boxed_contents("\\boxed{unclosed") == []


def test_normalize_and_compare_numbers():
    assert re_eval.normalize_number("12.0") == "12"
    assert re_eval.normalize_number("−3") == "-3"
    assert re_eval.normalize_number(".5") == "0.5"
    assert re_eval.normalize_number("-0") == "0"
    assert re_eval.numbers_equal("70", "70.0")
    assert not re_eval.numbers_equal("70", None)
    assert not re_eval.numbers_equal("7", "70")


def test_mcnemar_exact_matches_the_binomial_tail():
    # The pilot pairs (beacon vs full, rkv, snapkv, h2o at budget 64).
    assert abs(re_eval.mcnemar_exact(1, 4) - 0.375) < 1e-12
    assert abs(re_eval.mcnemar_exact(6, 1) - 0.125) < 1e-12
    assert abs(re_eval.mcnemar_exact(9, 2) - 134 / 2048) < 1e-12
    assert abs(re_eval.mcnemar_exact(12, 1) - 28 / 8192) < 1e-12
    assert re_eval.mcnemar_exact(0, 0) == 1.0
    assert re_eval.mcnemar_exact(3, 3) == 1.0
    assert re_eval.mcnemar_exact(0, 1) == 1.0
    assert abs(re_eval.mcnemar_exact(0, 6) - 2 / 64) < 1e-12
    # Symmetric in b and c; large n stays finite and exact.
    assert re_eval.mcnemar_exact(40, 60) == re_eval.mcnemar_exact(60, 40)
    assert 0.05 < re_eval.mcnemar_exact(40, 60) < 0.06
    # From 1,024 discordant answers on (a grid's cells against full pass that): 2.0 ** n overflowed.
    # 500:600 is z = 3.02 (normal approximation with continuity, p ~ 0.0029); 1100:50 is below any float.
    assert 0.0025 < re_eval.mcnemar_exact(500, 600) < 0.0033
    assert re_eval.mcnemar_exact(600, 600) == 1.0
    assert 0.0 <= re_eval.mcnemar_exact(1100, 50) < 1e-200


def test_holm():
    adj = re_eval.holm([0.01, 0.04, 0.03, 0.005])
    # sorted: 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1=0.04 -> running max 0.06
    assert [round(a, 10) for a in adj] == [0.03, 0.06, 0.06, 0.02]
    assert re_eval.holm([0.5, 0.9]) == [1.0, 1.0]
    assert re_eval.holm([]) == []
    assert re_eval.holm([0.2]) == [0.2]


def _rec(policy, budget, interval, index, correct, tokens=100, finish="stop", peak=None, evictions=None):
    return {"model": "m.gguf", "family": "gsm_symbolic", "seed": 1, "index": index, "policy": policy,
            "budget": budget, "interval": interval, "max_tokens": 1024, "correct": correct,
            "completion_tokens": tokens, "finish_reason": finish, "prompt_tokens": 50,
            "peak_cached_tokens": peak, "evictions": evictions}


def test_records_resume_and_summary():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "records.jsonl")
        full = [_rec("full", 0, 0, i, i < 8, tokens=200, finish="length" if i == 0 else "stop", peak=250)
                for i in range(10)]
        beacon = [_rec("beacon", 64, 16, i, i < 7, peak=130, evictions=3) for i in range(10)]
        h2o = [_rec("h2o", 64, 16, i, i < 2, peak=130, evictions=3) for i in range(10)]
        with open(path, "w") as f:
            for r in full + beacon + h2o + [beacon[9]]:  # a duplicate: kept once
                f.write(json.dumps(r) + "\n")
            f.write('{"torn": ')  # an interrupted write
        recs = re_eval.load_records(path)
        assert len(recs) == 30
        assert re_eval.record_key(beacon[3]) in {re_eval.record_key(r) for r in recs}
        text = re_eval.summarize(recs)
        assert "| full | - | - | - | 10 | 80.0% (8) | 200.0 | 10.0% |" in text, text
        # beacon loses one problem full solves (index 7): 1:0, p = 1; h2o 6:0, p = 2/64.
        assert ("| beacon | 64 | 16 | default | 10 | 70.0% (7) | 100.0 | 0.0% | 3.00 | 130 / 130 | 80 | 10, 1:0 | 1.000 |"
                in text), text
        assert "| h2o | 64 | 16 | default | 10 | 20.0% (2) |" in text and "10, 6:0 | 0.031 | 0.062 |" in text, text
        assert "| beacon | h2o | 10 | 5:0 | 0.062 | 0.062 |" in text, text
        # Another window is another cell, paired with full but not with the default window's cells.
        narrow = [dict(_rec("beacon", 64, 16, i, True), window=8) for i in range(10)]
        text = re_eval.summarize(recs + narrow)
        assert "| beacon | 64 | 16 | 8 | 10 | 100.0% (10) |" in text and "10, 0:2 | 0.500 | 1.000 |" in text, text
        assert "Pairs at budget 64, interval 16, window 8" not in text, text


def test_summary_reads_several_files_as_one():
    # The grid's cells and a cell run beside it by another script into its own file: one table, the
    # cells paired on their common problems; a key in both files keeps the later file's record.
    with tempfile.TemporaryDirectory() as d:
        grid, beside = os.path.join(d, "grid.jsonl"), os.path.join(d, "beside.jsonl")
        with open(grid, "w") as f:
            for i in range(10):
                f.write(json.dumps(_rec("full", 0, 0, i, True)) + "\n")
            f.write(json.dumps(_rec("h2o", 64, 16, 0, False)) + "\n")
        with open(beside, "w") as f:
            for i in range(10):
                f.write(json.dumps(_rec("h2o", 64, 16, i, i < 6)) + "\n")
        recs = re_eval.load_records(grid, beside)
        assert len(recs) == 20
        h2o0 = [r for r in recs if r["policy"] == "h2o" and r["index"] == 0]
        assert len(h2o0) == 1 and h2o0[0]["correct"], h2o0
        assert "| h2o | 64 | 16 | default | 10 | 60.0% (6) |" in re_eval.summarize(recs)
        out = os.path.join(d, "both.md")
        re_eval.main(["summary", grid, beside, "--markdown", out])
        with open(out) as f:
            assert "| h2o | 64 | 16 | default | 10 | 60.0% (6) |" in f.read()


def test_variants_are_cells_of_their_own():
    # An ablation: beacon with other server flags, in the same file. Its records key apart from the
    # default's (both resume), it is its own row, paired with full and with the default's cell.
    base = [_rec("beacon", 64, 16, i, i < 5) for i in range(10)]
    r4k28 = [dict(_rec("beacon", 64, 16, i, i < 8), variant="r4k28") for i in range(10)]
    full = [_rec("full", 0, 0, i, True) for i in range(10)]
    assert re_eval.record_key(base[0]) != re_eval.record_key(r4k28[0])
    assert re_eval.record_key(base[0]) == re_eval.record_key(dict(base[0], variant=None)), "old records key alike"
    # A budget in bytes is its own cell: beside the slot budget of the same N, paired only with its own peers.
    in_bytes = [dict(_rec("beacon", 64, 16, i, i < 2), match="bytes", kv_budget=20) for i in range(10)]
    assert re_eval.record_key(in_bytes[0]) != re_eval.record_key(base[0])
    assert re_eval.record_key(base[0]) == re_eval.record_key(dict(base[0], match=None)), "old records key alike"
    t2 = re_eval.summarize(full + base + in_bytes)
    assert "| beacon (bytes) | 64 | 16 | default | 10 | 20.0% (2) |" in t2, t2
    assert "Pairs at budget 64 in bytes" not in t2, "one cell per setting: no pairs"
    text = re_eval.summarize(full + base + r4k28)
    assert "| beacon | 64 | 16 | default | 10 | 50.0% (5) |" in text, text
    assert "| beacon [r4k28] | 64 | 16 | default | 10 | 80.0% (8) |" in text and "10, 2:0 | 0.500 |" in text, text
    assert "| beacon | beacon [r4k28] | 10 | 0:3 | 0.250 | 0.250 |" in text, text


def test_truncated_answers_score_nothing():
    """Issue 45: an answer cut at max_tokens is wrong even when a loop repeats the gold number; the file's
    rescore rewrites only the records the rule changes, keeping the first scoring beside."""
    import json
    import tempfile
    looped = dict(_rec("h2o", 32, 8, 1, True), finish_reason="length")
    kept = [_rec("h2o", 32, 8, 0, True), dict(_rec("h2o", 32, 8, 2, False), finish_reason="length")]
    assert re_eval.rescore_single(looped) == dict(looped, correct=False, correct_untruncated=True)
    assert all(re_eval.rescore_single(r) is r for r in kept)
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        lines = [json.dumps(r) + "\n" for r in (kept[0], looped, kept[1])]
        f.writelines(lines)
    re_eval.rescore_file(f.name)
    with open(f.name) as g:
        after = g.readlines()
    assert after[0] == lines[0] and after[2] == lines[2], "records the rule leaves alone stay byte for byte"
    assert json.loads(after[1])["correct"] is False and json.loads(after[1])["correct_untruncated"] is True


def test_cells():
    assert re_eval.parse_cell("beacon:64") == ("beacon", 64, None)
    assert re_eval.parse_cell("beacon:b288") == ("beacon", 288, "bytes")
    assert re_eval.parse_cell("full") == ("full", None, None)
    assert re_eval.cell_of("full", 64, 16, 8) == ("full", 0, 0, None)
    assert re_eval.cell_of("rkv", 64, 16) == ("rkv", 64, 16, None)
    assert re_eval.cell_of("rkv", 64, 16, 8) == ("rkv", 64, 16, 8)
    # Records written before `window` existed key as the server's default window.
    old = _rec("rkv", 64, 16, 3, True)
    assert re_eval.record_key(old) == re_eval.record_key(dict(old, window=None))
    # Any well-formed name passes (the server's registry says whether it exists); a malformed one does not.
    assert re_eval.parse_cell("newpolicy:32") == ("newpolicy", 32, None)
    for bad in ("No pe:1", "full:64", "beacon:x64", "beacon:b"):
        try:
            re_eval.parse_cell(bad)
        except Exception:  # noqa: BLE001
            continue
        raise AssertionError(bad)


def test_accuracy_by_chain_length():
    # Thirds of full's chain lengths; each cell is read on full's problems in each third, so a policy
    # that fails only the long chains shows it, and a record full lacks (index 9) counts nowhere.
    full = [_rec("full", 0, 0, i, i != 8, tokens=100 * (1 + i // 3)) for i in range(9)]
    beacon = [_rec("beacon", 64, 16, i, i < 3, tokens=50) for i in range(10)]
    text = re_eval.summarize(full + beacon)
    assert "thirds of its 9 chains" in text, text
    assert "| policy | budget | interval | window | chain < 200 | chain 200-299 | chain >= 300 |" in text, text
    assert "| full | - | - | - | 100% (3/3) | 100% (3/3) | 67% (2/3) |" in text, text
    assert "| beacon | 64 | 16 | default | 100% (3/3), 0:0 | 0% (0/3), 3:0 | 0% (0/3), 2:0 |" in text, text
    # Too few full chains to cut in thirds: no table.
    assert "chain length" not in re_eval.summarize(full[:2] + beacon[:2])


def test_summary_names_the_binaries():
    # Records name the binary that wrote them (issue 45's provenance); the summary counts them, so a file
    # written by two builds (a pinned commit rebuilt on another machine) says so under its tables.
    a = [dict(_rec("full", 0, 0, i, True), binary_sha256="9f5e30e192aa" + "0" * 52, commit="0948606" + "0" * 33)
         for i in range(3)]
    b = [dict(_rec("full", 0, 0, i, True), binary_sha256="1adcc3c1ecea" + "0" * 52, commit="0948606" + "0" * 33)
         for i in range(3, 5)]
    old = [_rec("beacon", 64, 16, 0, True)]
    line = re_eval.binaries_line(a + b + old)
    assert line == ("Records by binary: sha256 9f5e30e192aa... (commit 0948606): 3; sha256 1adcc3c1ecea... "
                    "(commit 0948606): 2; not recorded: 1."), line
    assert line in re_eval.summary_text(a + b + old)


if __name__ == "__main__":
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            fn()
    print("reasoning_eval: ok")
