// A tiny DOM builder: elements from data, never HTML strings, so nothing the
// API returns is ever parsed as markup.
function apply(el, attrs) {
    if (!attrs)
        return;
    for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null || v === false)
            continue;
        if (k.startsWith('on') && typeof v === 'function') {
            el.addEventListener(k.slice(2).toLowerCase(), v);
        }
        else if (k === 'class') {
            el.setAttribute('class', String(v));
        }
        else if (k === 'value' && 'value' in el) {
            el.value = String(v);
        }
        else if (k === 'checked' && 'checked' in el) {
            el.checked = Boolean(v);
        }
        else {
            el.setAttribute(k, v === true ? '' : String(v));
        }
    }
}
function append(el, children) {
    for (const c of children) {
        if (c === null || c === undefined || c === false)
            continue;
        if (Array.isArray(c))
            append(el, c);
        else if (c instanceof Node)
            el.appendChild(c);
        else
            el.appendChild(document.createTextNode(String(c)));
    }
}
export function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    apply(el, attrs);
    append(el, children);
    return el;
}
const SVG = 'http://www.w3.org/2000/svg';
export function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVG, tag);
    apply(el, attrs);
    append(el, children);
    return el;
}
export function replace(el, ...children) {
    el.replaceChildren();
    append(el, children);
}
// Formats an RFC 3339 time for people: local, to the second.
export function when(t) {
    if (!t)
        return '—';
    const d = new Date(t);
    if (Number.isNaN(d.getTime()))
        return t;
    return d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' });
}
export function timeEl(t) {
    if (!t)
        return '—';
    return h('time', { datetime: t, title: t }, when(t));
}
// "1.2 s", "3 min 4 s" between two times.
export function duration(from, to) {
    if (!from || !to)
        return '';
    const ms = new Date(to).getTime() - new Date(from).getTime();
    if (!Number.isFinite(ms) || ms < 0)
        return '';
    if (ms < 1000)
        return `${ms} ms`;
    if (ms < 60_000)
        return `${(ms / 1000).toFixed(1)} s`;
    const m = Math.floor(ms / 60_000);
    return `${m} min ${Math.round((ms % 60_000) / 1000)} s`;
}
export function badge(status) {
    return h('span', { class: `badge badge-${status.replace(/[^a-z_]/g, '')}`, 'data-status': status }, status);
}
