/**
 * The malformed-request corpus: raw bytes over net.connect to the API's unix
 * socket; each is a 4xx or a closed connection, and the server keeps serving.
 */
import { describe, expect, it } from 'vitest';
import { apiSocketStand, curlHttp, raw } from '../support/api-socket.js';
import { waitFor } from '../support/wait.js';

const st = apiSocketStand();

describe('malformed-request corpus: 4xx or a closed connection, and the server keeps serving', () => {
  const big = 'x'.repeat(200_000);
  const corpus: [string, (string | { waitMs: number })[], RegExp | null][] = [
    [
      'bad JSON',
      ['POST /v1/containers/cron/restart HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{"a":tru}'],
      /^HTTP\/1.1 400/,
    ],
    [
      'deep JSON',
      [
        `POST /v1/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n${'['.repeat(100)}${']'.repeat(100)}`,
      ],
      /^HTTP\/1.1 400/,
    ],
    [
      'huge body (declared)',
      [`POST /v1/containers/cron/upgrade HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n`, big],
      /^HTTP\/1.1 413/,
    ],
    [
      'huge body (chunked)',
      [
        'POST /v1/containers/cron/upgrade HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n',
        `${(100_000).toString(16)}\r\n${big.slice(0, 100_000)}\r\n`,
        `${(100_000).toString(16)}\r\n${big.slice(0, 100_000)}\r\n0\r\n\r\n`,
      ],
      /^HTTP\/1.1 413/,
    ],
    [
      'slow headers',
      ['GET /v1/status HTTP/1.1\r\nHost: x\r\n', { waitMs: 1_500 }, 'X-Late: 1\r\n\r\n'],
      /^HTTP\/1.1 408/,
    ],
    [
      'Content-Length with chunked',
      [
        'POST /v1/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
      ],
      /^HTTP\/1.1 400/,
    ],
    ['garbage request line', ['\x16\x03\x01\x02\x00garbage\r\n\r\n'], /^HTTP\/1.1 400/],
    ['unknown method', ['BREW /v1/status HTTP/1.1\r\nHost: x\r\n\r\n'], /^HTTP\/1.1 4\d\d/],
    [
      'header overflow',
      [`GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(40_000)}\r\n\r\n`],
      /^HTTP\/1.1 431/,
    ],
    [
      'two Content-Lengths',
      ['POST /v1/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}'],
      /^HTTP\/1.1 400/,
    ],
    [
      'truncated body then close',
      ['POST /v1/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"a"'],
      null,
    ],
  ];

  it.each(corpus)('%s', async (_name, parts, expected) => {
    const before = st.actions.calls.length;
    // with no answer expected, the client closes after 300 ms
    const r = await raw(st.sockPath, parts, expected === null ? 300 : 3_000);
    if (expected) {
      expect(r.out).toMatch(expected);
      expect(r.out).toMatch(/\r\n\r\n\{"code":"[A-Z_]+","message":/);
    }
    // the server is done with the request: its connection is gone on the server's side too
    await waitFor('the server to let the connection go', () => st.api.connections().open === 0, {
      timeoutMs: 5_000,
    });
    expect(st.actions.calls.length).toBe(before); // nothing malformed reached an action
    expect((await curlHttp(st, 'GET', '/v1/status')).status).toBe(200);
  });
});
