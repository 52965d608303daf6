"""A model an auditor can only query: an OpenAI-compatible HTTP endpoint (vLLM, SGLang, llama.cpp's server,
`transformers serve`, hosted APIs), reached through the `openai` client (`client`), every exchange written to a
request ledger that is also the cache a resumed audit reads (`ledger`), read in the mode the server allows (`modes`)."""
