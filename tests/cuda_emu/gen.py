#!/usr/bin/env python3
"""Rewrites a CUDA source (.cu) into C++ that the CPU emulator compiles.

Usage: gen.py INPUT.cu OUTPUT.cc

Three rewrites, nothing else (the fake headers in fake/ supply the rest):

  kernel<<<grid, block[, smem[, stream]]>>>(args...);
    -> ::emu::LaunchKernel("file.cu:kernel", kernel, dim3(grid), dim3(block),
                           smem, stream, args...);
     `kernel` may be a name, a qualified name, a template-id or a variable
     holding a kernel pointer. Arguments are converted to the kernel's
     parameter types at the launch (fake/emu_device.h).

  cudaLaunchKernelEx(config, kernel, args...)
    -> ::emu::LaunchKernelEx("file.cu:kernel", config, kernel, args...)
     (an expression: its value is the launch's error), so the launch has a
     name for the findings.

  extern __shared__ [__align__(n)] T name[];
    -> T* name = reinterpret_cast<T*>(::emu::DynamicSharedMemory());

Line numbers are preserved (a `#line` directive names the original file and
every rewrite keeps its newline count), so compiler errors and debuggers
point into kernels/cuda/*.cu. Launches are found outside comments and string
literals only. Anything the rewriter does not understand is an error, never
a silent pass-through: the output would not compile or, worse, not launch.
"""
import os
import re
import sys


def code_mask(src):
    """`src` with comments and string/char literals blanked (same length), so
    that searches only see code; newlines are kept."""
    out = list(src)
    i, n = 0, len(src)
    while i < n:
        two = src[i:i + 2]
        if two == '//':
            j = src.find('\n', i)
            j = n if j < 0 else j
        elif two == '/*':
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
        elif src[i] in '"\'':
            j = i + 1
            while j < n and src[j] != src[i]:
                j += 2 if src[j] == '\\' else 1
            j += 1
        else:
            i += 1
            continue
        for k in range(i, min(j, n)):
            if out[k] != '\n':
                out[k] = ' '
        i = j
    return ''.join(out)


def fail(path, pos, src, why):
    line = src.count('\n', 0, pos) + 1
    sys.exit('%s:%d: gen.py: %s' % (path, line, why))


def kernel_start(code, end):
    """Start of the kernel expression that ends (before whitespace) at `end`."""
    i = end
    while i > 0 and code[i - 1].isspace():
        i -= 1
    if code[i - 1] == '>':  # a template-id: skip its balanced <...>
        depth = 0
        while True:
            i -= 1
            if i < 0:
                return -1
            if code[i] == '>':
                depth += 1
            elif code[i] == '<':
                depth -= 1
                if depth == 0:
                    break
    while i > 0 and (code[i - 1].isalnum() or code[i - 1] in '_:'):
        i -= 1
    return i


def balanced_end(code, start, open_ch, close_ch):
    """Index just past the bracket closing the one at `start`."""
    depth = 0
    for j in range(start, len(code)):
        if code[j] == open_ch:
            depth += 1
        elif code[j] == close_ch:
            depth -= 1
            if depth == 0:
                return j + 1
    return -1


def split_top_level(text):
    """Splits on commas outside (), [] and {}."""
    parts, depth, cur = [], 0, ''
    for ch in text:
        depth += ch in '([{'
        depth -= ch in ')]}'
        if ch == ',' and depth == 0:
            parts.append(cur.strip())
            cur = ''
        else:
            cur += ch
    parts.append(cur.strip())
    return [p for p in parts if p]


def rewrite_launches(path, src):
    code = code_mask(src)
    base = os.path.basename(path)
    out, pos, count = [], 0, 0
    for m in re.finditer(r'<<<', code):
        k = m.start()
        if k < pos:
            continue
        start = kernel_start(code, k)
        kernel = ' '.join(src[start:k].split())
        if start < 0 or not kernel:
            fail(path, k, src, 'cannot find the kernel before <<<')
        close = code.find('>>>', k)
        config = split_top_level(src[k + 3:close]) if close > 0 else []
        if not 2 <= len(config) <= 4:
            fail(path, k, src, 'launch configuration is not <<<grid, block[, smem[, stream]]>>>')
        paren = close + 3
        while paren < len(code) and code[paren].isspace():
            paren += 1
        if paren >= len(code) or code[paren] != '(':
            fail(path, k, src, 'no argument list after >>>')
        args_end = balanced_end(code, paren, '(', ')')
        semi = args_end
        while 0 < semi < len(code) and code[semi].isspace():
            semi += 1
        if args_end < 0 or semi >= len(code) or code[semi] != ';':
            fail(path, k, src, 'a launch must be a statement of its own: kernel<<<...>>>(...);')
        grid, block = config[0], config[1]
        smem = config[2] if len(config) > 2 else '0'
        stream = config[3] if len(config) > 3 else 'nullptr'
        args = src[paren + 1:args_end - 1]
        label = ('%s:%s' % (base, kernel)).replace('\\', '').replace('"', '')
        call = '::emu::LaunchKernel("%s", %s, dim3(%s), dim3(%s), %s, %s%s);' % (
            label, kernel, grid, block, smem, stream, ', ' + args if args.strip() else '')
        replaced = src[start:semi + 1]
        call += '\n' * (replaced.count('\n') - call.count('\n'))
        out.append(src[pos:start])
        out.append(call)
        pos = semi + 1
        count += 1
    out.append(src[pos:])
    return ''.join(out), count


def rewrite_launch_ex(path, src):
    code = code_mask(src)
    out, pos, count = [], 0, 0
    for m in re.finditer(r'\bcudaLaunchKernelEx\s*\(', code):
        paren = m.end() - 1
        end = balanced_end(code, paren, '(', ')')
        args = split_top_level(src[paren + 1:end - 1]) if end > 0 else []
        if len(args) < 2:
            fail(path, m.start(), src, 'cudaLaunchKernelEx needs (config, kernel, args...)')
        kernel = ' '.join(args[1].split())
        label = ('%s:%s' % (os.path.basename(path), kernel)).replace('\\', '').replace('"', '')
        out.append(src[pos:m.start()])
        out.append('::emu::LaunchKernelEx("%s", ' % label)
        pos = paren + 1
        count += 1
    out.append(src[pos:])
    return ''.join(out), count


EXTERN_SHARED = re.compile(
    r'extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?'  # qualifiers
    r'([A-Za-z_][\w:]*(?:\s+[A-Za-z_][\w:]*)*?)\s+'          # element type (may be several words)
    r'(?:__align__\(\s*\d+\s*\)\s+)?(\w+)\s*\[\s*\]\s*;')    # name[]


def rewrite_extern_shared(src):
    def repl(m):
        elem, name = ' '.join(m.group(1).split()), m.group(2)
        return '%s* %s = reinterpret_cast<%s*>(::emu::DynamicSharedMemory());' % (elem, name, elem)
    return EXTERN_SHARED.subn(repl, src)


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: gen.py INPUT.cu OUTPUT.cc')
    path, dst = sys.argv[1], sys.argv[2]
    with open(path) as f:
        src = f.read()
    src, launches = rewrite_launches(path, src)
    src, launches_ex = rewrite_launch_ex(path, src)
    launches += launches_ex
    src, arrays = rewrite_extern_shared(src)
    if re.search(r'extern\s+__shared__', code_mask(src)):
        sys.exit('%s: gen.py: an extern __shared__ declaration it cannot rewrite' % path)
    if '<<<' in code_mask(src):
        sys.exit('%s: gen.py: a <<< it did not rewrite' % path)
    text = '#line 1 "%s"\n%s' % (os.path.abspath(path), src)
    with open(dst + '.tmp', 'w') as f:
        f.write(text)
    os.replace(dst + '.tmp', dst)  # never a half-written output
    if os.environ.get('EMU_GEN_VERBOSE'):
        print('%s: %d launches, %d dynamic shared arrays' % (path, launches, arrays), file=sys.stderr)


if __name__ == '__main__':
    main()
