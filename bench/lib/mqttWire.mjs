// Raw MQTT 3.1.1 for the load generator: packets are pre-encoded once (mqtt-packet), then
// written as bytes; incoming bytes are only framed and counted, never fully parsed.
import net from "node:net";
import mqtt from "mqtt-packet";

const V = { protocolVersion: 4 };

export const encode = {
  connect: (clientId, keepalive = 60, clean = true) =>
    mqtt.generate({ cmd: "connect", protocolId: "MQTT", protocolVersion: 4, clean, clientId, keepalive }, V),
  subscribe: (messageId, topic, qos) => mqtt.generate({ cmd: "subscribe", messageId, subscriptions: [{ topic, qos }] }, V),
  publish: (topic, payload, qos = 0, messageId) =>
    mqtt.generate({ cmd: "publish", topic, payload, qos, retain: false, dup: false, ...(qos > 0 ? { messageId } : {}) }, V),
  pingreq: () => Buffer.from([0xc0, 0x00]),
  disconnect: () => Buffer.from([0xe0, 0x00]),
};

/** Where a PUBLISH packet's packet id and payload start (fixed-header length `hl`). */
export function publishLayout(packet) {
  let hl = 1;
  while (packet[hl] & 0x80) hl++;
  hl++;
  const topicLen = packet.readUInt16BE(hl);
  const qos = (packet[0] >> 1) & 3;
  const idAt = qos > 0 ? hl + 2 + topicLen : -1;
  const payloadAt = hl + 2 + topicLen + (qos > 0 ? 2 : 0);
  return { idAt, payloadAt, length: packet.length };
}

/** `n` copies of one packet in one buffer: one socket write per batch. */
export function repeat(packet, n) {
  const out = Buffer.allocUnsafe(packet.length * n);
  for (let i = 0; i < n; i++) packet.copy(out, i * packet.length);
  return out;
}

/**
 * One raw MQTT connection. `onPublish(buf, start, end, qos, payloadAt)` sees every PUBLISH;
 * QoS 1 PUBLISHes are acknowledged in one write per socket read.
 */
export class RawMqtt {
  /** `clean: false`: a 3.1.1 persistent session (the MQTT store's subscribers). */
  constructor({ host, port, localAddress, clientId, keepalive = 60, clean = true, onPublish, onPuback }) {
    this.clean = clean;
    this.host = host;
    this.port = port;
    this.localAddress = localAddress;
    this.clientId = clientId;
    this.keepalive = keepalive;
    this.onPublish = onPublish;
    this.onPuback = onPuback;
    this.rest = null;
    this.waiters = [];
    this.received = 0;
    this.ackBuf = null; // allocated on the first QoS 1 PUBLISH
  }

  connect() {
    return new Promise((resolve, reject) => {
      const s = net.connect({ host: this.host, port: this.port, ...(this.localAddress ? { localAddress: this.localAddress } : {}) });
      this.socket = s;
      s.setNoDelay(true);
      s.on("error", (e) => {
        this.error = e;
        reject(e);
        for (const w of this.waiters.splice(0)) w.reject(e);
      });
      s.on("close", () => {
        this.closed = true;
        for (const w of this.waiters.splice(0)) w.reject(new Error(`${this.clientId}: socket closed`));
      });
      s.on("data", (c) => this.onData(c));
      s.on("connect", () => {
        this.waitFor(2).then((p) => (p[3] === 0 ? resolve(this) : reject(new Error(`CONNACK ${p[3]}`))), reject);
        s.write(encode.connect(this.clientId, this.keepalive, this.clean));
      });
    });
  }

  async subscribe(topic, qos) {
    const w = this.waitFor(9);
    this.socket.write(encode.subscribe(1, topic, qos));
    const p = await w;
    if (p[p.length - 1] === 0x80) throw new Error(`SUBACK refused ${topic}`);
  }

  /** Resolves with the next packet of this type (a copy). */
  waitFor(type) {
    return new Promise((resolve, reject) => this.waiters.push({ type, resolve, reject }));
  }

  write(buf) {
    return this.socket.write(buf);
  }

  close() {
    if (!this.socket || this.socket.destroyed) return;
    this.socket.end(encode.disconnect());
    this.socket.destroy();
  }

  onData(chunk) {
    let buf = chunk;
    if (this.rest) {
      buf = Buffer.concat([this.rest, chunk]);
      this.rest = null;
    }
    const n = buf.length;
    let pos = 0;
    let acks = 0;
    while (pos + 2 <= n) {
      // Remaining Length varint
      let len = 0;
      let mult = 1;
      let i = pos + 1;
      let b;
      do {
        if (i >= n) {
          len = -1;
          break;
        }
        b = buf[i++];
        len += (b & 0x7f) * mult;
        mult *= 128;
      } while (b & 0x80);
      if (len < 0 || i + len > n) break;
      const end = i + len;
      const type = buf[pos] >> 4;
      if (type === 3) {
        this.received++;
        const qos = (buf[pos] >> 1) & 3;
        const topicLen = (buf[i] << 8) | buf[i + 1];
        let payloadAt = i + 2 + topicLen;
        if (qos > 0) {
          this.ackBuf ??= Buffer.allocUnsafe(4 * 4096);
          if (acks * 4 + 4 > this.ackBuf.length) {
            this.socket.write(Buffer.from(this.ackBuf.subarray(0, acks * 4)));
            acks = 0;
          }
          const o = acks * 4;
          this.ackBuf[o] = 0x40;
          this.ackBuf[o + 1] = 2;
          this.ackBuf[o + 2] = buf[payloadAt];
          this.ackBuf[o + 3] = buf[payloadAt + 1];
          acks++;
          payloadAt += 2;
        }
        if (this.onPublish) this.onPublish(buf, pos, end, qos, payloadAt);
      } else if (type === 4) {
        if (this.onPuback) this.onPuback(1, (buf[i] << 8) | buf[i + 1]);
      } else if (this.waiters.length) {
        const wi = this.waiters.findIndex((w) => w.type === type);
        if (wi >= 0) this.waiters.splice(wi, 1)[0].resolve(Buffer.from(buf.subarray(pos, end)));
      }
      pos = end;
    }
    if (acks) this.socket.write(Buffer.from(this.ackBuf.subarray(0, acks * 4)));
    if (pos < n) this.rest = Buffer.from(buf.subarray(pos));
  }
}
