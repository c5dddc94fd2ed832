/**
 * mqtt-packet's parser used past its public API, in one place (docs/decisions/vendor-patches.md):
 * one process-wide parser whose `settings` (mqtt-packet 9.0.2, pinned; `Parser` keeps the
 * protocol version there and replaces it with a 3.1.1 bridge's CONNECT) are set per packet
 * from the connection's own. test/vendor.test.ts fails when `Parser`'s source changes.
 */
import mqtt, { type Packet } from "mqtt-packet";
import { readVarInt, skipProperties, userPropertiesAt } from "../protocol/mqttProperties.js";

/**
 * What mqtt-packet's parser reads from its settings: the protocol version, and bridge
 * mode (3.1.1 bridges; it replaces its settings with the CONNECT packet it parsed).
 */
export interface ParserSettings {
  readonly protocolVersion: 4 | 5;
  readonly bridgeMode?: boolean;
}

const V4: ParserSettings = Object.freeze({ protocolVersion: 4 });
const V5: ParserSettings = Object.freeze({ protocolVersion: 5 });
const V4_BRIDGE: ParserSettings = Object.freeze({ protocolVersion: 4, bridgeMode: true });

/** The settings a connection parses with before CONNECT (3.1.1: CONNECT itself says its version). */
export const beforeConnect = V4;

/** The settings that follow a CONNECT, as mqtt-packet's own parser would have kept them. */
export function settingsAfterConnect(version: 4 | 5, bridgeMode: boolean | undefined): ParserSettings {
  return version === 5 ? V5 : bridgeMode ? V4_BRIDGE : V4;
}

type Parser = ReturnType<typeof mqtt.parser>;

/** The upstream code the parser's use relies on (test/vendor.test.ts hashes its source). */
export const upstream: Readonly<Record<string, unknown>> = {
  "mqtt-packet parser.js Parser": Object.getPrototypeOf(mqtt.parser()).constructor,
};

let parser: Parser | undefined;
let result: Packet | Error | undefined;

function fresh(): Parser {
  const p = mqtt.parser(V4);
  p.on("packet", (packet: Packet) => {
    result ??= packet;
  });
  p.on("error", (e: Error) => {
    result ??= e;
  });
  return p;
}

/**
 * Parses one whole packet (a frame from `splitFrames`) with mqtt-packet. One parser serves
 * every connection: a connection used to keep its own (1.6 KiB each: an event emitter and
 * a buffer list), though it only ever gave it whole packets. Parsing is synchronous and
 * calls nothing back, so it cannot be re-entered; a parser left with an error or unread
 * bytes is replaced.
 */
export function parsePacket(frame: Buffer, settings: ParserSettings): Packet | Error {
  const p = (parser ??= fresh());
  // `Parser.settings`: what `_parseConnect`, `_parsePublish` ... read the version from.
  (p as unknown as { settings: ParserSettings }).settings = settings;
  result = undefined;
  let left: number;
  try {
    left = p.parse(frame);
  } catch (e) {
    left = -1;
    result ??= e instanceof Error ? e : new Error(String(e));
  }
  const r = result ?? new Error("incomplete packet");
  result = undefined;
  if (left !== 0 || r instanceof Error) parser = undefined;
  // It keeps the CONNECT it parsed as its settings: let go of it.
  else (p as unknown as { settings: ParserSettings }).settings = V4;
  if (!(r instanceof Error)) keepUserPropertyOrder(r, frame);
  return r;
}

/**
 * mqtt-packet groups User Properties by key: the PUBLISH and the will of a CONNECT (the
 * packets whose properties reach NATS) get them again as pairs in wire order, read from
 * the frame mqtt-packet has just accepted.
 */
function keepUserPropertyOrder(packet: Packet, frame: Buffer): void {
  if (packet.cmd === "publish" && packet.properties?.userProperties) {
    const at = publishPropertiesAt(frame, packet.qos);
    const pairs = at === undefined ? undefined : userPropertiesAt(frame, at, frame.length);
    if (pairs) (packet.properties as { userProperties: unknown }).userProperties = pairs;
  } else if (packet.cmd === "connect" && packet.will?.properties?.userProperties) {
    const at = willPropertiesAt(frame);
    const pairs = at === undefined ? undefined : userPropertiesAt(frame, at, frame.length);
    if (pairs) (packet.will.properties as { userProperties: unknown }).userProperties = pairs;
  }
}

/** Past the fixed header: the Remaining Length varint after the first byte. */
function variableHeaderAt(frame: Buffer): number | undefined {
  return readVarInt(frame, 1)?.next;
}

/** After a two-byte length and that many bytes (a string or binary field) at `at`. */
function skipField(frame: Buffer, at: number | undefined): number | undefined {
  if (at === undefined || at + 2 > frame.length) return undefined;
  return at + 2 + frame.readUInt16BE(at);
}

function publishPropertiesAt(frame: Buffer, qos: number): number | undefined {
  const afterTopic = skipField(frame, variableHeaderAt(frame));
  return afterTopic === undefined ? undefined : afterTopic + (qos > 0 ? 2 : 0);
}

/** CONNECT: protocol name, level, flags, keep alive, properties, client id, then the will's properties. */
function willPropertiesAt(frame: Buffer): number | undefined {
  const afterName = skipField(frame, variableHeaderAt(frame));
  if (afterName === undefined) return undefined;
  const afterConnectProps = skipProperties(frame, afterName + 4, frame.length);
  return skipField(frame, afterConnectProps);
}
