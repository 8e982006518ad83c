import yaml from 'js-yaml';

/**
 * The flow collections (`{ ... }`, `[ ... ]`) of a YAML text that span more
 * than one line, found through js-yaml's node listener (so block scalars and
 * comments that hold brackets do not count). Prettier keeps flow style and
 * breaks a long one over lines; the shipped sets stay in block style instead.
 */
export function multiLineFlows(text: string): { line: number; kind: string }[] {
  const starts: { pos: number; ch: string | undefined }[] = [];
  const found = new Map<number, { line: number; kind: string }>();
  const lineOf = (pos: number): number => text.slice(0, pos).split('\n').length;
  yaml.load(text, {
    listener(event, state) {
      const s = state as unknown as { position: number; kind: string };
      if (event === 'open') {
        let p = s.position;
        while (p < text.length && /[ \t\r\n]/.test(text[p] ?? '')) p++;
        starts.push({ pos: p, ch: text[p] });
        return;
      }
      const open = starts.pop();
      if (!open || (open.ch !== '{' && open.ch !== '[')) return;
      if (lineOf(s.position - 1) !== lineOf(open.pos))
        found.set(open.pos, { line: lineOf(open.pos), kind: open.ch === '{' ? 'mapping' : 'sequence' });
    },
  });
  return [...found.values()];
}
