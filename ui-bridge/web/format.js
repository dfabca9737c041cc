// Formatting for people: sizes, ages and times.

const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/** bytes formats a byte count in binary units, e.g. 1.5 GiB. */
export function bytes(n) {
  if (n === null || n === undefined) return "—";
  let i = 0, v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? String(v) : v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)) + " " + units[i];
}

/** age formats a duration in milliseconds as its two largest units, e.g. 3d 4h or 2m 05s. */
export function age(ms) {
  if (!(ms >= 0)) ms = 0;
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24, m = Math.floor(s / 60) % 60, sec = s % 60;
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${String(m).padStart(2, "0")}m`;
  if (m > 0) return `${m}m ${String(sec).padStart(2, "0")}s`;
  return `${sec}s`;
}

/** when formats an RFC 3339 time as a local date and time, "—" when absent. */
export function when(t) {
  if (!t) return "—";
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" });
}

/** sizeSource turns "docker_engine:used" into words. */
export function sizeSource(src) {
  if (!src) return "";
  const [origin, kind] = src.split(":");
  const o = { docker_engine: "Docker Engine", agent_server: "agent-server", provider_api: "provider API" }[origin] || origin;
  return kind === "allocated" ? `allocated, per ${o}` : `used, per ${o}`;
}

/** span says a whole number of seconds in its largest exact unit, e.g. 30 days, 10 minutes. */
export function span(s) {
  for (const [n, name] of [[86400, "day"], [3600, "hour"], [60, "minute"], [1, "second"]]) {
    if (s % n === 0) return s / n === 1 ? `1 ${name}` : `${s / n} ${name}s`;
  }
  return `${s} seconds`;
}

/**
 * clockWords says what a provider's deletion clock (GET /v1/providers
 * clocks[]) does, e.g. "deletes the box the paused TTL after it stops, when
 * asked at create" or "may destroy an idle box after a period it does not
 * publish". companion providers inspect says the same (ClockSummary.Words).
 */
export function clockWords(c) {
  const files = c.loses === "files", idle = c.starts === "idle";
  if (!c.after_seconds && !c.setting) {
    const box = idle ? "an idle box" : "a stopped box";
    return (files ? `may wipe the files of ${box}` : `may destroy ${box}`) + " after a period it does not publish";
  }
  const what = files ? "wipes the box's files" : "deletes the box";
  const after = idle ? "after its last activity" : c.starts === "running" ? "after it was made, while it runs" : "after it stops";
  if (c.setting) return `${what} the paused TTL ${after}, when asked at create`;
  return `${what} ${span(c.after_seconds)} ${after}`;
}
