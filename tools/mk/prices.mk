# The price catalog (pricing/catalog_gen.go), regenerated from the public
# price database pinned in tools/pricecatalog/package-lock.json
# (@pydantic/genai-prices on npm) by tools/pricecatalog; the rules of the
# conversion: docs/price-catalog.md.
#   make prices                           # the prices in force today
#   make prices PRICES_DATE=2026-12-07    # those in force on a date
# To move to a newer version of the database: change its version in
# tools/pricecatalog/package.json, npm install --prefix tools/pricecatalog,
# make prices, then read the summary it prints and the diff.
PRICES_DATE ?=

.PHONY: prices

prices: sdks
	cd tools && $(GO) run ./pricecatalog -dir pricecatalog -out ../pricing/catalog_gen.go $(if $(PRICES_DATE),-date $(PRICES_DATE))
