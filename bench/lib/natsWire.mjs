// Raw NATS client protocol for the load generator: pre-encoded PUB batches out, MSG/HMSG
// counted in (the payload is skipped, not copied), PING answered.
import net from "node:net";

const CRLF = Buffer.from("\r\n");
const PONG = Buffer.from("PONG\r\n");

export function encodePub(subject, payload) {
  return Buffer.concat([Buffer.from(`PUB ${subject} ${payload.length}\r\n`), payload, CRLF]);
}

export class RawNats {
  constructor({ host, port, onMsg }) {
    this.host = host;
    this.port = port;
    this.onMsg = onMsg;
    this.received = 0;
    this.rest = null;
    this.pongWaiters = [];
  }

  connect() {
    return new Promise((resolve, reject) => {
      const s = net.connect({ host: this.host, port: this.port });
      this.socket = s;
      s.setNoDelay(true);
      s.on("error", reject);
      s.on("data", (c) => this.onData(c));
      s.once("connect", () => {
        s.write(`CONNECT {"verbose":false,"pedantic":false,"protocol":1,"headers":true,"no_responders":true,"name":"bench"}\r\n`);
        this.ping().then(() => resolve(this), reject);
      });
    });
  }

  ping() {
    return new Promise((resolve) => {
      this.pongWaiters.push(resolve);
      this.socket.write("PING\r\n");
    });
  }

  subscribe(subject, sid) {
    this.socket.write(`SUB ${subject} ${sid}\r\n`);
    return this.ping();
  }

  write(buf) {
    return this.socket.write(buf);
  }

  close() {
    this.socket?.destroy();
  }

  onData(chunk) {
    let buf = chunk;
    if (this.rest) {
      buf = Buffer.concat([this.rest, chunk]);
      this.rest = null;
    }
    const n = buf.length;
    let pos = 0;
    while (pos < n) {
      const eol = buf.indexOf(13, pos);
      if (eol < 0 || eol + 1 >= n) break;
      const c0 = buf[pos];
      if (c0 === 0x4d || c0 === 0x48) {
        // MSG <subject> <sid> [reply] <size> | HMSG <subject> <sid> [reply] <hsize> <size>
        let sp = eol - 1;
        while (buf[sp] !== 0x20) sp--;
        let size = 0;
        for (let i = sp + 1; i < eol; i++) size = size * 10 + (buf[i] - 48);
        const end = eol + 2 + size + 2;
        if (end > n) break;
        this.received++;
        if (this.onMsg) this.onMsg(buf, eol + 2, eol + 2 + size);
        pos = end;
        continue;
      }
      if (c0 === 0x50) {
        if (buf[pos + 1] === 0x49) this.socket.write(PONG);
        else this.pongWaiters.shift()?.();
      } else if (c0 === 0x2d) {
        process.stderr.write(`nats: ${buf.toString("utf8", pos, eol)}\n`);
      }
      pos = eol + 2;
    }
    if (pos < n) this.rest = Buffer.from(buf.subarray(pos));
  }
}
