"""tools/longest_functions.py (issue 33): on a C++ file written here, with
function bodies of known lengths and the traps the scanner must not fall in
(braces in comments, strings, raw strings and character literals, digit
separators, lambdas, constructor init lists, initialisers, classes and
namespaces), it lists exactly those bodies with the right lengths, names and
lines; --top and --min-lines select from them; the default run over the
repository finds bodies."""
import importlib.util
import os
import subprocess
import sys
import tempfile

SRC = os.environ.get("BEACON_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(SRC, "tools", "longest_functions.py")
_spec = importlib.util.spec_from_file_location("longest_functions", SCRIPT)
lf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lf)

# Each function's '{' line and length is stated in the test below; line 1 is the #include.
SAMPLE = r'''#include <string>
#define BRACE {
namespace demo {
/* a comment with { braces
   } over lines */
int Short(int x) { return x; }
class Widget : public Base {
 public:
  Widget(int a) : a_{a}, b_(2) {
    // } a brace in a comment
  }
  int Get() const {
    const char* s = "}}}";
    char c = '{';
    long big = 1'000'000;
    return a_ + s[0] + c;
  }
  Widget& operator=(const Widget& o) {
    a_ = o.a_;
    return *this;
  }
 private:
  int a_{0};
  int b_;
};
static const int kTable[] = {1, 2, 3};
auto kLambda = [](int y) { return y; };
std::string Raw() {
  return R"x(
    } not a brace
  )x";
}
void Outer(int n) {
  auto f = [&](int k) {
    if (k > 0) {
      n += k;
    }
  };
  struct Local {
    int v() { return 1; }
  };
  for (int i = 0; i < n; ++i) {
    f(i);
  }
}
}  // namespace demo
'''

EXPECTED = {  # (first line, lines, name)
    (6, 1, "Short"),
    (9, 3, "Widget"),
    (12, 6, "Get"),
    (18, 4, "operator="),
    (28, 5, "Raw"),
    (33, 13, "Outer"),
}


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, check=True).stdout


def test_bodies_of_a_sample():
    got = {(start, n, name) for n, start, name in lf.function_bodies(SAMPLE)}
    assert got == EXPECTED, sorted(got)


def test_blanking_keeps_lines():
    code = lf.blank_code(SAMPLE)
    assert code.count("\n") == SAMPLE.count("\n")
    assert "not a brace" not in code and "a brace in a comment" not in code and "BRACE" not in code


def test_output_top_and_min_lines():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "sample.cc")
        with open(path, "w") as f:
            f.write(SAMPLE)
        out = run("--top", "3", path).splitlines()
        assert out[0] == "# 1 files, 6 function bodies; over 100 lines: 0; over 60: 0", out
        rows = [line.split() for line in out[1:]]
        assert rows == [["13", f"{os.path.normpath(path)}:33", "Outer"],
                        ["6", f"{os.path.normpath(path)}:12", "Get"],
                        ["5", f"{os.path.normpath(path)}:28", "Raw"]], rows
        # A folder is walked; --min-lines keeps bodies of at least that many lines; --top 0 lists all.
        out = run("--top", "0", "--min-lines", "4", d).splitlines()
        assert [line.split()[0] for line in out[1:]] == ["13", "6", "5", "4"], out
        assert out[0].startswith("# 1 files, 6 function bodies"), out


def test_default_is_the_repositorys_sources():
    out = run("--top", "1").splitlines()
    head = out[0].split()
    assert head[0] == "#" and int(head[1]) > 100 and int(head[3]) > 1000, out[0]
    assert len(out) == 2 and not out[1].split()[1].startswith("tests/"), out


if __name__ == "__main__":
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            fn()
    print("longest_functions: ok")
