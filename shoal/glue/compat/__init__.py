"""Parent folder of Shoal's `awsglue` package; `shoal glue run` puts it on sys.path for a script's run only."""
