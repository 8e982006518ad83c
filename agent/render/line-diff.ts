/**
 * A small line diff (longest common subsequence after trimming the common
 * head and tail) with unified-style hunks. Config files are small; past
 * MAX_CELLS the middle is shown as a whole replacement instead.
 */

export type LineOp = { readonly kind: ' ' | '-' | '+'; readonly text: string };

const MAX_CELLS = 4_000_000;

export function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

export function diffLines(a: readonly string[], b: readonly string[]): LineOp[] {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (
    tail < a.length - head &&
    tail < b.length - head &&
    a[a.length - 1 - tail] === b[b.length - 1 - tail]
  )
    tail++;
  const ops: LineOp[] = a.slice(0, head).map((text) => ({ kind: ' ', text }));
  const am = a.slice(head, a.length - tail);
  const bm = b.slice(head, b.length - tail);
  const n = am.length;
  const m = bm.length;
  if ((n + 1) * (m + 1) > MAX_CELLS) {
    ops.push(
      ...am.map((text) => ({ kind: '-' as const, text })),
      ...bm.map((text) => ({ kind: '+' as const, text })),
    );
  } else {
    // lcs[i][j] = LCS length of am[i..] and bm[j..]
    const w = m + 1;
    const lcs = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i * w + j] =
          am[i] === bm[j]
            ? (lcs[(i + 1) * w + j + 1] ?? 0) + 1
            : Math.max(lcs[(i + 1) * w + j] ?? 0, lcs[i * w + j + 1] ?? 0);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && am[i] === bm[j]) {
        ops.push({ kind: ' ', text: am[i] ?? '' });
        i++;
        j++;
      } else if (j >= m || (i < n && (lcs[(i + 1) * w + j] ?? 0) >= (lcs[i * w + j + 1] ?? 0))) {
        // Ties go to the deletion, so a change block reads '-' lines then '+' lines.
        ops.push({ kind: '-', text: am[i] ?? '' });
        i++;
      } else {
        ops.push({ kind: '+', text: bm[j] ?? '' });
        j++;
      }
    }
  }
  ops.push(...a.slice(a.length - tail).map((text) => ({ kind: ' ' as const, text })));
  return ops;
}

/** Unified-style hunks ("@@ -l,s +l,s @@") with `context` lines around each change. */
export function formatHunks(ops: readonly LineOp[], context = 3): string[] {
  const out: string[] = [];
  const changed = ops.map((o) => o.kind !== ' ');
  let k = 0;
  // Line numbers (1-based) of ops[k] in the old and new file.
  const oldNo: number[] = [];
  const newNo: number[] = [];
  let on = 1;
  let nn = 1;
  for (const o of ops) {
    oldNo.push(on);
    newNo.push(nn);
    if (o.kind !== '+') on++;
    if (o.kind !== '-') nn++;
  }
  while (k < ops.length) {
    if (!changed[k]) {
      k++;
      continue;
    }
    const start = Math.max(0, k - context);
    let end = k;
    // extend while another change starts within 2*context of the last one
    let last = k;
    for (let x = k; x < ops.length; x++) {
      if (changed[x]) last = x;
      else if (x - last > 2 * context) break;
    }
    end = Math.min(ops.length, last + context + 1);
    const slice = ops.slice(start, end);
    const oldCount = slice.filter((o) => o.kind !== '+').length;
    const newCount = slice.filter((o) => o.kind !== '-').length;
    const oldStart = oldCount === 0 ? (oldNo[start] ?? 1) - 1 : (oldNo[start] ?? 1);
    const newStart = newCount === 0 ? (newNo[start] ?? 1) - 1 : (newNo[start] ?? 1);
    out.push(`@@ -${oldStart},${oldCount} +${newStart},${newCount} @@`);
    for (const o of slice) out.push(`${o.kind}${o.text}`);
    k = end;
  }
  return out;
}
