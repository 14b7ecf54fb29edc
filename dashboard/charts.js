// Small time-series charts: one SVG polyline per series over its last `size` samples.
import { h } from './dom.js';

const SVG = 'http://www.w3.org/2000/svg';

export class Series {
  constructor(size = 60) { this.size = size; this.points = []; }
  push(v) { this.points.push(v); if (this.points.length > this.size) this.points.shift(); }
  get last() { return this.points[this.points.length - 1]; }
}

export function chart(label, series) {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', '0 0 100 30');
  svg.setAttribute('preserveAspectRatio', 'none');
  const line = document.createElementNS(SVG, 'polyline');
  svg.append(line);
  const p = series.points;
  const max = Math.max(1, ...p);
  // a single sample is drawn as a flat line; more are spread over the width
  const pts = p.length === 1 ? [p[0], p[0]] : p;
  const step = 100 / Math.max(1, pts.length - 1);
  line.setAttribute('points', pts.map((v, i) => `${(i * step).toFixed(2)},${(28 - (v / max) * 26).toFixed(2)}`).join(' '));
  return h('div', { class: 'chart', 'data-series': label }, h('div', { class: 'meta' }, `${label}: `, h('b', {}, String(series.last ?? '–'))), svg);
}
