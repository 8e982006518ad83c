import { describe, expect, it } from 'vitest';
import { lineSplitter } from '../../agent/engine/lines.js';

describe('the line splitter for the engine event stream', () => {
  it('gives whole lines across chunks, trims them, drops empty ones, keeps a split UTF-8 character whole', () => {
    const lines: string[] = [];
    const feed = lineSplitter((l) => lines.push(l));
    const text = Buffer.from('{"a":1}\n\n  {"name":"nova_é"}  \n{"b"', 'utf8');
    const cut = text.indexOf(0xc3) + 1; // inside the two bytes of "é"
    feed(text.subarray(0, 5));
    feed(text.subarray(5, cut));
    feed(text.subarray(cut));
    expect(lines).toEqual(['{"a":1}', '{"name":"nova_é"}']);
    feed(Buffer.from(':2}\n'));
    expect(lines.at(-1)).toBe('{"b":2}');
  });
});
