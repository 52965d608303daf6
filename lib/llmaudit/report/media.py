"""The report's CSS for a printer and a phone. Printed, every folded block the verdicts depend on (per-test gates, how
a verdict is read, prompts, solutions) is shown unfolded, tables wrap instead of scrolling (a scroll bar prints as a
cut), and a page breaks between table rows rather than pushing a long table whole to the next page. Below 640 px,
the first screen's table stacks one requirement per card, and wider tables and figures scroll within themselves, so
the page itself never runs off screen; a figure keeps its drawn size there (shrunk to 390 px, a two-panel figure's
13 px labels would be 6 px)."""

CSS = """
@media print {
  @page { margin: 14mm 12mm; }
  body { max-width: none; padding: 0; font-size: 10pt; }
  a { color: inherit; text-decoration: none; }
  section.chapter { break-before: page; }
  details::details-content { content-visibility: visible; display: block; }
  details > summary { list-style: none; font-weight: 600; color: var(--fg); }
  details > summary::-webkit-details-marker { display: none; }
  details.code:has(> pre > code) { display: none; }
  table, table.answer, table.verdicts { display: table; width: 100%; max-width: none; overflow: visible;
                                        font-size: 8.5pt; }
  th, td { overflow-wrap: break-word; }
  ul.tests li { white-space: normal; }
  figure, tr, pre, dl.glossary > dd { break-inside: avoid; }
  table { break-inside: auto; }
  thead { display: table-header-group; }
  h2, h3 { break-after: avoid; }
  nav.toc { display: none; }
  #glossary { break-before: page; }
}
@media (max-width: 640px) {
  body { padding: .5rem .75rem 2rem; font-size: 15px; }
  table.answer, table.verdicts { display: block; width: 100%; }
  table.answer thead, table.verdicts thead { display: none; }
  table.answer :is(tbody, tr, td), table.verdicts :is(tbody, tr, td) {
    display: block; width: auto !important; min-width: 0 !important; white-space: normal !important; }
  table.answer tr, table.verdicts tr { border: 1px solid var(--border); border-radius: 6px; margin: 0 0 .6rem;
                                       padding: .25rem 0; }
  table.answer td, table.verdicts td { border: 0; padding: .2rem .6rem; text-align: left !important; }
  table.headlines, table.cases, table.results { display: block; max-width: 100%; overflow-x: auto; }
  pre { white-space: pre-wrap; overflow-wrap: anywhere; }
  figure { overflow-x: auto; }
  figure svg { max-width: none; }
  ul.tests li { white-space: normal; }
  nav.toc ol ol { columns: 1; }
  dl.card, dl.glossary { grid-template-columns: 1fr; }
  dl.glossary dd { margin-bottom: .4rem; }
  h1 { font-size: 1.4rem; }
  #answer p.bottom-line { font-size: 1rem; }
}
""".strip()
