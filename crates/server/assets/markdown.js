// A small markdown renderer for chat replies: fenced code blocks (with a Copy button), headings,
// lists, block quotes, tables, rules, paragraphs; inline code, bold, italic, strikethrough and
// http(s) links. Everything is HTML-escaped first, so model output can never inject markup.
"use strict";

const Markdown = (() => {
  const escapeHtml = (s) =>
    s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");

  // Inline spans of one escaped line: code spans are cut out first so nothing inside them changes.
  function inline(text) {
    const codes = [];
    let s = escapeHtml(text).replace(/`([^`]+)`/g, (_, c) => {
      codes.push(c);
      return `\u0000${codes.length - 1}\u0000`;
    });
    s = s
      .replace(/\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g, (_, label, url) =>
        `<a href="${url}" target="_blank" rel="noopener noreferrer">${label}</a>`)
      .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
      .replace(/__([^_]+)__/g, "<strong>$1</strong>")
      .replace(/(^|[^*\w])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>")
      .replace(/(^|[^_\w])_([^_\s][^_]*)_(?!\w)/g, "$1<em>$2</em>")
      .replace(/~~([^~]+)~~/g, "<del>$1</del>");
    return s.replace(/\u0000(\d+)\u0000/g, (_, i) => `<code>${codes[Number(i)]}</code>`);
  }

  function codeBlock(lang, lines) {
    const label = lang ? `<span class="lang">${escapeHtml(lang)}</span>` : "<span></span>";
    return `<div class="code">` +
      `<div class="code-head">${label}<button type="button" class="copy">Copy</button></div>` +
      `<pre><code>${escapeHtml(lines.join("\n"))}</code></pre></div>`;
  }

  const cells = (line) => line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
  const isTableRule = (line) => /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/.test(line);

  function render(text) {
    const lines = text.replace(/\r\n/g, "\n").split("\n");
    const out = [];
    let para = [];
    const flush = () => {
      if (para.length) out.push(`<p>${para.map(inline).join("<br>")}</p>`);
      para = [];
    };
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      const fence = line.match(/^\s*(```+|~~~+)\s*([\w+#.-]*)/);
      if (fence) {
        flush();
        const body = [];
        // An unclosed fence (a reply still streaming) runs to the end.
        for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) body.push(lines[i]);
        out.push(codeBlock(fence[2], body));
        continue;
      }
      const heading = line.match(/^(#{1,6})\s+(.*)$/);
      if (heading) {
        flush();
        const level = Math.min(6, heading[1].length + 2);
        out.push(`<h${level}>${inline(heading[2])}</h${level}>`);
        continue;
      }
      if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
        flush();
        out.push("<hr>");
        continue;
      }
      if (/^\s*>/.test(line)) {
        flush();
        const quoted = [];
        for (; i < lines.length && /^\s*>/.test(lines[i]); i++) quoted.push(lines[i].replace(/^\s*>\s?/, ""));
        i--;
        out.push(`<blockquote>${render(quoted.join("\n"))}</blockquote>`);
        continue;
      }
      const item = /^\s*([-*+]|\d+[.)])\s+/;
      if (item.test(line)) {
        flush();
        const ordered = /^\s*\d/.test(line);
        const items = [];
        for (; i < lines.length && item.test(lines[i]); i++) items.push(`<li>${inline(lines[i].replace(item, ""))}</li>`);
        i--;
        out.push(ordered ? `<ol>${items.join("")}</ol>` : `<ul>${items.join("")}</ul>`);
        continue;
      }
      if (line.includes("|") && i + 1 < lines.length && isTableRule(lines[i + 1])) {
        flush();
        const head = cells(line).map((c) => `<th>${inline(c)}</th>`).join("");
        const rows = [];
        for (i += 2; i < lines.length && lines[i].includes("|"); i++) {
          rows.push(`<tr>${cells(lines[i]).map((c) => `<td>${inline(c)}</td>`).join("")}</tr>`);
        }
        i--;
        out.push(`<table><thead><tr>${head}</tr></thead><tbody>${rows.join("")}</tbody></table>`);
        continue;
      }
      if (line.trim() === "") {
        flush();
        continue;
      }
      para.push(line);
    }
    flush();
    return out.join("");
  }

  return { render, escapeHtml };
})();
