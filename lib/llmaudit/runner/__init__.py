"""What runs the audit and builds its book: a chapter notebook's context, the papermill run of a params file's
chapters, and the book's contents, reader and offline check. The top layer: nothing below it imports it."""
