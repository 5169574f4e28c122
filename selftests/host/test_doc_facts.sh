#!/usr/bin/env bash
# scripts/check/doc-facts, the guard of the docs' figures (issue 36): the
# real docs pass (README.md and docs/*.md, every page). Negative controls on pages of its own: a
# figure in prose that contradicts the row of a generated block it quotes
# gives exactly that finding; a figure with a unit and no date or commit
# fails, and passes once the date and commit are added; a setting marked
# with <!-- doc-facts: setting --> passes, a marker of an unknown kind does
# not. Also: what the check must not count (code, another run's figure, a
# dated block's table), the exit status of bad usage. No VM.
. "$(dirname "$0")/../lib.sh"
DF=$KPX_ROOT/scripts/check/doc-facts
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
command -v python3 > /dev/null || skip "no python3"

# The real docs.
out=$(cd "$KPX_ROOT" && "$DF" 2>&1); rc=$?
[ "$rc" = 0 ] || fail "doc-facts on the real docs exited $rc: $out"
assert_match "$out" '^doc-facts: 0 findings in [0-9]+ files$' "summary on the real docs"
note "$out"

# df FILE...: doc-facts on the pages, from $t; output in $out, status in $rc.
df() {
	out=$(cd "$t" && "$DF" "$@" 2>&1); rc=$?
}

# (a) A page with a generated block, and prose that quotes a row of it
# with another figure: exactly one finding, on that line.
cat > "$t/block.md" <<'EOF'
# Demo

<!-- demo:begin -->
Run of 2026-01-02 at commit `abc1234def`.

| case | result | time |
| --- | --- | --- |
| `fast-path` | PASS | 12.4 s |
| `slow-path` | PASS | 340 ms |
<!-- demo:end -->

The `fast-path` row of the `demo` block took 15 s.
EOF
df block.md
assert_eq "$rc" 1 "exit status with a contradicting figure"
assert_eq "$out" "doc-facts: block.md:12: contradicts: '15 s' after \"fast-path\"; the demo block's row(s) \"fast-path\" say 12400 ms
doc-facts: 1 findings in 1 files" "the contradiction's finding"
# The same figure in other units and roundings agrees; a figure of another
# run (a date the block does not hold) is not compared; so is a row's
# figure in its own table, inside the block.
sed -i 's/^The `fast-path` row of the `demo` block took 15 s\.$/The `fast-path` row of the `demo` block took 12.4 s; "slow-path" took 0.34 s; the `fast-path` took 12 s./' "$t/block.md"
df block.md
assert_eq "$rc" 0 "agreeing figures (12.4 s, 0.34 s = 340 ms, 12 s ~ 12.4 s): $out"
cat >> "$t/block.md" <<'EOF'

On 2025-12-31 the `fast-path` took 20 s.
EOF
df block.md
assert_eq "$rc" 0 "another run's figure compared: $out"

# (b) An undated figure with a unit fails; (c) with the date and commit it
# passes.
cat > "$t/undated.md" <<'EOF'
# Demo

The attach took 2,500 ms on our kernel, 3.1x faster than stock, over
21,348 sites.
EOF
df undated.md
assert_eq "$rc" 1 "exit status with undated figures"
assert_eq "$out" "doc-facts: undated.md:3: undated: '2,500 ms' (no date or commit in its paragraph)
doc-facts: undated.md:3: undated: '3.1x' (no date or commit in its paragraph)
doc-facts: undated.md:4: undated: '21,348 sites' (no date or commit in its paragraph)
doc-facts: 3 findings in 1 files" "the undated figures' findings"
sed 's/^21,348 sites\.$/21,348 sites (run of 2026-01-02 at commit 1a2b3c4d)./' "$t/undated.md" > "$t/dated.md"
df dated.md
assert_eq "$rc" 0 "the same page with the date and commit: $out"
assert_eq "$out" "doc-facts: 0 findings in 1 files" "summary of a clean page"

# (d) Settings marked as such pass: a marker at the end of the line, and
# one on its own line before the paragraph. A marker of another kind is a
# finding.
cat > "$t/setting.md" <<'EOF'
# Demo

The test polls for up to 10 s before it gives up. <!-- doc-facts: setting -->

<!-- doc-facts: setting (the batching window) -->
The worker waits 10 ms, then takes
the whole queue, 64 at a time, within 200 ms.
EOF
df setting.md
assert_eq "$rc" 0 "marked settings: $out"
sed 's/doc-facts: setting -->/doc-facts: settings -->/' "$t/setting.md" > "$t/badmark.md"
df badmark.md
assert_eq "$rc" 1 "a marker of an unknown kind passed: $out"
assert_match "$out" "badmark.md:3: bad-marker: '<!-- doc-facts: settings -->'" "bad marker finding"
assert_match "$out" "badmark.md:3: undated: '10 s'" "a bad marker exempts nothing"
# The marker exempts its line only.
printf '# Demo\n\nThe test polls for 10 s, <!-- doc-facts: setting -->\nand the run took 42 s.\n' > "$t/line.md"
df line.md
assert_eq "$out" "doc-facts: line.md:4: undated: '42 s' (no date or commit in its paragraph)
doc-facts: 1 findings in 1 files" "a line marker exempts its line only"

# Not figures: code blocks and inline code; hex and identifiers. A table
# inside a block dated per row, a list item under a dated lead-in and a
# paragraph that cites a dated block are dated.
cat > "$t/notfig.md" <<'EOF'
# Demo

Run `sleep 5s` or `timeout 10 s` as you like; 0x1de, x86 and v2s are no figures.

```sh
kpctl attach --trigger 100 ms
```

<!-- runs:begin -->
Series HEAD and date (UTC) per row.

| run | time |
| --- | --- |
| a | 100 s |
<!-- runs:end -->

The `runs` block says 100 s.

What the run of 2026-01-03 (commit 0a1b2c3) found:

- an attach of 20 ms;
  - and a detach of 1 ms.
EOF
df notfig.md
assert_eq "$rc" 0 "code, identifiers, dated blocks, cited blocks, lead-ins: $out"
# Its control: without the lead-in's date and commit, the block's "per
# row" and the citation, the same figures are undated.
sed 's/ of 2026-01-03 (commit 0a1b2c3)//; s/ per row\././; s/^The `runs` block says/It says/' \
	"$t/notfig.md" > "$t/notfig2.md"
df notfig2.md
assert_eq "$out" "doc-facts: notfig2.md:14: undated: '100 s' (no date or commit in its table row, nor a dated block it lies in or cites)
doc-facts: notfig2.md:17: undated: '100 s' (no date or commit in its paragraph)
doc-facts: notfig2.md:21: undated: '20 ms' (no date or commit in its list item)
doc-facts: notfig2.md:22: undated: '1 ms' (no date or commit in its list item)
doc-facts: 4 findings in 1 files" "the control of the dated contexts"

# --skip, and bad usage.
df --skip undated.md undated.md dated.md
assert_eq "$rc" 0 "--skip left undated.md in: $out"
assert_eq "$out" "doc-facts: 0 findings in 1 files" "summary with --skip"
df --no-such-option dated.md
assert_eq "$rc" 2 "exit status of an unknown option"
df no-such-file.md
assert_eq "$rc" 2 "exit status of a missing file"
df --skip
assert_eq "$rc" 2 "exit status of --skip without a file"
echo "doc-facts: the real docs pass; a contradiction, undated figures and a bad marker are found; dates, commits, markers, code and other runs are not"
