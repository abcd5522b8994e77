"""Above the stages: the rleif CLI, the papermill runner, resume markers, the outer loop, the HTML report, check-api and doctor."""
