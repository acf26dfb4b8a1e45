"""What an evaluation writes for people and other tools: TREC run and qrels files (:mod:`.trec_writer`;
read back by :mod:`.trec`), ``evaluation_results.json`` (:mod:`.results`), the Markdown tables of the Dagster UI (:mod:`.tables`)."""
