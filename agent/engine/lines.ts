import { StringDecoder } from 'node:string_decoder';

/**
 * A 'data' handler that cuts a byte stream into lines, trimmed, empty ones
 * dropped (Docker's event stream sends one JSON document a line). A UTF-8
 * character split across two chunks is decoded whole.
 */
export function lineSplitter(onLine: (line: string) => void): (chunk: Buffer) => void {
  const decoder = new StringDecoder('utf8');
  let buf = '';
  return (chunk) => {
    buf += decoder.write(chunk);
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) onLine(line);
    }
  };
}
