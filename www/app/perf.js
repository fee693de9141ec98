// The page's performance timeline: every update's marks and measures (`kvlab:*`), which the
// tests and the benchmarks (benches/page.mjs, benches/model.mjs) read, kept bounded.

import { app } from './store.js';

/**
 * How many updates' marks and measures the page keeps on the performance timeline. The browser
 * keeps every entry until it is cleared, and an update leaves about ten (a drag: sixty updates a
 * second), so a long visit would grow the list without bound. An init script may lower it
 * (`globalThis.KVLAB_TIMELINE_KEEP`), as the tests do.
 */
const TIMELINE_KEEP = Number(globalThis.KVLAB_TIMELINE_KEEP) > 0 ? Number(globalThis.KVLAB_TIMELINE_KEEP) : 1000;

/**
 * Counts an update; after TIMELINE_KEEP of them, clears the page's per-update marks and
 * measures (every `kvlab:` measure and the `kvlab:update:start` mark; the one-off
 * `kvlab:load:*` marks stay), so the timeline holds the last TIMELINE_KEEP updates at most.
 */
export function trimTimeline() {
  if (++app.timed < TIMELINE_KEEP) return;
  app.timed = 0;
  const names = new Set(performance.getEntriesByType('measure')
    .map((m) => m.name).filter((n) => n.startsWith('kvlab:')));
  for (const name of names) performance.clearMeasures(name);
  performance.clearMarks('kvlab:update:start');
}

/** Page-side measures of the engine's timings (durations as the engine measured them). */
export function measureTimings(timings, start, prefix = 'kvlab:') {
  if (!timings) return;
  let at = start;
  // The request's way to the engine (and its wait behind an earlier request), and the reply's
  // way back, when the engine says when it started and sent (epoch ms; the page's clock is
  // performance.now(), from timeOrigin).
  if (timings.started !== undefined) {
    at = Math.max(start, timings.started - performance.timeOrigin);
    performance.measure(`${prefix}to-engine`, { start, end: at });
    const sent = Math.max(at, timings.sent - performance.timeOrigin);
    performance.measure(`${prefix}from-engine`, { start: sent, end: Math.max(sent, performance.now()) });
  }
  if (timings.compute) {
    performance.measure(`${prefix}compute`, { start: at, duration: timings.compute });
    at += timings.compute;
  }
  for (const [name, ms] of Object.entries(timings.draws ?? {})) {
    performance.measure(`${prefix}draw:${name}`, { start: at, duration: ms });
    at += ms;
  }
}

/**
 * Marks the engine's start-up (epoch times from engine.js `epochNow`) on the page's timeline,
 * each step once.
 */
export function markTimeline(timeline) {
  for (const [name, at] of Object.entries(timeline ?? {})) {
    const mark = `kvlab:load:engine-${name}`;
    const startTime = at - performance.timeOrigin;
    if (startTime >= 0 && !performance.getEntriesByName(mark).length) performance.mark(mark, { startTime });
  }
}

