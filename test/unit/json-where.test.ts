import { describe, expect, it } from 'vitest';
import { describeJsonFault, jsonFault } from '../../agent/model/json-where.js';

describe('jsonFault: where a text stops being JSON, quoting none of it', () => {
  it('accepts what JSON.parse accepts', () => {
    for (const t of ['{}', '[]', ' {"a": [1, -2.5e3, true, false, null, "x\\u00e9\\n"]} ', '"s"', '0']) {
      expect(() => JSON.parse(t) as unknown).not.toThrow();
      expect(jsonFault(t)).toBeUndefined();
    }
  });

  it('names line, column and what was expected', () => {
    expect(jsonFault('{"password": hunter2}')).toEqual({ line: 1, column: 14, expected: 'a value' });
    expect(jsonFault('{\n  "a": 1\n  "b": 2\n}')).toEqual({ line: 3, column: 3, expected: "',' or '}'" });
    expect(jsonFault('{"a":1,}')).toEqual({ line: 1, column: 8, expected: 'a double-quoted property name' });
    expect(jsonFault('"a\tb"')).toEqual({
      line: 1,
      column: 3,
      expected: 'no control character inside a string',
    });
    expect(jsonFault('"\\x"')).toEqual({ line: 1, column: 2, expected: 'a valid escape sequence' });
    expect(jsonFault('{} x')).toEqual({ line: 1, column: 4, expected: 'the end of the text' });
    expect(jsonFault('"open')).toEqual({ line: 1, column: 6, expected: "the closing '\"' of a string" });
    expect(jsonFault('['.repeat(600))?.expected).toBe('less nesting (512 levels at most)');
    const text = describeJsonFault(jsonFault('{"password": hunter2}')!);
    expect(text).toBe('line 1, column 14: expected a value');
    expect(text).not.toContain('hunter');
  });
});
