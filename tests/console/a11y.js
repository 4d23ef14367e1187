// Checks a page as a keyboard and screen-reader user needs it: returns a list of problems (empty: fine).
// Every control labelled, every button and link named, one h1 first and no skipped heading level,
// text contrast at least WCAG AA (4.5:1, 3:1 for large text) against its effective background.
() => {
  const problems = [];
  const visible = (el) => el.type !== 'hidden' && !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
  for (const el of document.querySelectorAll('input, select, textarea')) {
    if (el.type === 'hidden') continue;
    const named = (el.labels && el.labels.length) || el.getAttribute('aria-label') || el.getAttribute('aria-labelledby');
    if (!named) problems.push('no label: ' + el.outerHTML.slice(0, 80));
  }
  for (const el of document.querySelectorAll('button, a[href], summary')) {
    const name = (el.getAttribute('aria-label') || el.textContent || '').trim();
    if (!name) problems.push('no name: ' + el.outerHTML.slice(0, 80));
  }
  const levels = [...document.querySelectorAll('h1, h2, h3, h4, h5, h6')].map(h => +h.tagName[1]);
  if (levels.filter(l => l === 1).length !== 1 || levels[0] !== 1) problems.push('one h1 first: ' + levels);
  levels.forEach((l, i) => { if (i && l > levels[i - 1] + 1) problems.push('heading skips: ' + levels); });
  const lum = (rgb) => {
    const [r, g, b] = rgb.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const parse = (c) => (c.match(/[\d.]+/g) || []).map(Number);
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] === 1)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  for (const el of document.querySelectorAll('body *')) {
    if (!visible(el)) continue;
    const text = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (!text) continue;
    const style = getComputedStyle(el);
    const fg = parse(style.color).slice(0, 3), bg = background(el);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    const ratio = (a + 0.05) / (b + 0.05);
    const size = parseFloat(style.fontSize), bold = +style.fontWeight >= 700;
    const needed = (size >= 24 || (size >= 18.66 && bold)) ? 3 : 4.5;
    if (ratio < needed) problems.push(`contrast ${ratio.toFixed(2)} < ${needed}: ${el.tagName} "${el.textContent.trim().slice(0, 30)}"`);
  }
  return problems;
}
