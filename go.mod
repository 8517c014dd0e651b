module marketfeed

go 1.26.8

require (
	github.com/ericlagergren/decimal v0.0.0-20240411145413-00de7ca16731
	github.com/goccy/go-json v0.12.0
	github.com/klauspost/compress v1.20.0
	github.com/robfig/cron/v3 v3.0.2-0.20210106135023-bc59245fe10e
	github.com/valyala/fasthttp v1.74.0
)

require (
	github.com/molecule-man/go-brrr v1.0.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
)
