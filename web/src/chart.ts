// Successes and failures per hour as a small inline SVG bar chart: no
// library, no canvas, readable by a screen reader through its title,
// description and a per-hour <title>.

import { s } from './dom.js';
import type { HourStats, Stats } from './types.js';

const HOUR = 3_600_000;

// The last `hours` hours ending with the current one, oldest first; hours
// the API did not list count zero.
export function slots(stats: Stats, hours: number, now = Date.now()): HourStats[] {
  const byHour = new Map<number, HourStats>();
  for (const h of stats.hours ?? []) {
    const t = Math.floor(new Date(h.hour).getTime() / HOUR) * HOUR;
    if (Number.isFinite(t)) byHour.set(t, h);
  }
  const current = Math.floor(now / HOUR) * HOUR;
  const out: HourStats[] = [];
  for (let i = hours - 1; i >= 0; i--) {
    const t = current - i * HOUR;
    const h = byHour.get(t);
    out.push({ hour: new Date(t).toISOString(), succeeded: h?.succeeded ?? 0, failed: h?.failed ?? 0 });
  }
  return out;
}

function hourLabel(iso: string): string {
  return new Date(iso).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
}

export function chart(stats: Stats, hours = 24): SVGSVGElement {
  const data = slots(stats, hours);
  const W = 480;
  const H = 140;
  const left = 28;
  const bottom = 20;
  const top = 8;
  const plotW = W - left - 4;
  const plotH = H - bottom - top;
  const max = Math.max(1, ...data.map((d) => Math.max(d.succeeded, d.failed)));
  const group = plotW / data.length;
  const bar = Math.max(2, (group - 3) / 2);
  const y = (v: number) => top + plotH - (v / max) * plotH;
  const total = data.reduce((a, d) => ({ ok: a.ok + d.succeeded, bad: a.bad + d.failed }), { ok: 0, bad: 0 });

  const svg = s('svg', {
    class: 'chart',
    viewBox: `0 0 ${W} ${H}`,
    role: 'img',
    'aria-labelledby': 'chart-title chart-desc',
    preserveAspectRatio: 'xMidYMid meet',
  });
  svg.append(
    s('title', { id: 'chart-title' }, `Finished jobs per hour, last ${hours} hours`),
    s('desc', { id: 'chart-desc' }, `${total.ok} succeeded and ${total.bad} failed in the last ${hours} hours; the busiest hour had ${max === 1 && total.ok + total.bad === 0 ? 0 : max}.`),
    // Axes and the scale.
    s('line', { x1: left, y1: top + plotH, x2: W - 4, y2: top + plotH, class: 'axis' }),
    s('line', { x1: left, y1: top, x2: left, y2: top + plotH, class: 'axis' }),
    s('text', { x: left - 4, y: top + 8, class: 'tick', 'text-anchor': 'end' }, String(max)),
    s('text', { x: left - 4, y: top + plotH, class: 'tick', 'text-anchor': 'end' }, '0'),
  );
  data.forEach((d, i) => {
    const x = left + 2 + i * group;
    const g = s('g', { class: 'hour', 'data-hour': d.hour, 'data-succeeded': d.succeeded, 'data-failed': d.failed });
    g.append(
      s('title', null, `${hourLabel(d.hour)}: ${d.succeeded} succeeded, ${d.failed} failed`),
      // A transparent hit area so the title shows over empty hours too.
      s('rect', { x, y: top, width: group - 1, height: plotH, class: 'hit' }),
      s('rect', { x, y: y(d.succeeded), width: bar, height: Math.max(0, top + plotH - y(d.succeeded)), class: 'ok' }),
      s('rect', { x: x + bar + 1, y: y(d.failed), width: bar, height: Math.max(0, top + plotH - y(d.failed)), class: 'bad' }),
    );
    const last = i === data.length - 1;
    if (last) {
      g.append(s('text', { x: W - 4, y: H - 6, class: 'tick', 'text-anchor': 'end' }, hourLabel(d.hour)));
    } else if (i % 6 === 0 && data.length - i > 4) {
      g.append(s('text', { x: i === 0 ? left : x + group / 2, y: H - 6, class: 'tick', 'text-anchor': i === 0 ? 'start' : 'middle' }, hourLabel(d.hour)));
    }
    svg.append(g);
  });
  return svg;
}
