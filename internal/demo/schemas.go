package demo

// Hand-written JSON Schemas (draft 2020-12) of the demo tools. Inputs leave
// unknown keys allowed (they are ignored); outputs describe exactly what
// structuredContent carries.

const (
	statusEnum   = `{"type":"string","enum":["open","in_progress","done"]}`
	priorityEnum = `{"type":"string","enum":["low","medium","high","urgent"]}`
	dateTime     = `{"type":"string","format":"date-time"}`

	personSchema = `{"type":"object","properties":{` +
		`"id":{"type":"string","description":"Person id, e.g. u-ben"},` +
		`"name":{"type":"string"},"email":{"type":"string"},"role":{"type":"string"},` +
		`"team":{"type":"string","enum":["platform","web","mobile"]}},` +
		`"required":["id","name","email","role","team"]}`

	issueSummarySchema = `{"type":"object","properties":{` +
		`"id":{"type":"string","description":"Issue id, e.g. WEB-1"},` +
		`"project":{"type":"string"},"title":{"type":"string"},` +
		`"status":` + statusEnum + `,"priority":` + priorityEnum + `,` +
		`"assignee":{"type":["string","null"],"description":"Person id, or null when unassigned"},` +
		`"labels":{"type":"array","items":{"type":"string"}},` +
		`"commentCount":{"type":"integer","minimum":0},` +
		`"updatedAt":` + dateTime + `},` +
		`"required":["id","project","title","status","priority","assignee","labels","commentCount","updatedAt"]}`

	commentSchema = `{"type":"object","properties":{` +
		`"id":{"type":"string"},"author":{"type":"string"},"body":{"type":"string"},"createdAt":` + dateTime + `},` +
		`"required":["id","author","body","createdAt"]}`

	issueSchema = `{"type":"object","properties":{` +
		`"id":{"type":"string"},"project":{"type":"string"},"title":{"type":"string"},` +
		`"description":{"type":"string"},"status":` + statusEnum + `,"priority":` + priorityEnum + `,` +
		`"assignee":{"type":["string","null"]},"reporter":{"type":"string"},` +
		`"labels":{"type":"array","items":{"type":"string"}},` +
		`"createdAt":` + dateTime + `,"updatedAt":` + dateTime + `,` +
		`"comments":{"type":"array","items":` + commentSchema + `}},` +
		`"required":["id","project","title","description","status","priority","assignee","reporter","labels","createdAt","updatedAt","comments"]}`

	emptyInput = `{"type":"object","properties":{}}`

	listProjectsOutput = `{"type":"object","properties":{"projects":{"type":"array","items":{"type":"object","properties":{` +
		`"key":{"type":"string","description":"Project key, e.g. WEB"},"name":{"type":"string"},"description":{"type":"string"},` +
		`"lead":{"type":"string","description":"Person id of the project lead"},` +
		`"status":{"type":"string","enum":["active","planning"]},` +
		`"issueCounts":{"type":"object","properties":{"open":{"type":"integer"},"in_progress":{"type":"integer"},"done":{"type":"integer"}},"required":["open","in_progress","done"]}},` +
		`"required":["key","name","description","lead","status","issueCounts"]}}},"required":["projects"]}`

	searchIssuesInput = `{"type":"object","properties":{` +
		`"query":{"type":"string","maxLength":200,"description":"Words that must all appear in the title or description (case-insensitive). Omit to browse."},` +
		`"project":{"type":"string","description":"Project key, e.g. WEB, API, MOB"},` +
		`"status":` + statusEnum + `,"priority":` + priorityEnum + `,` +
		`"assignee":{"type":"string","description":"Person id, e.g. u-ben; \"none\" for unassigned issues"},` +
		`"label":{"type":"string","description":"Label name, e.g. bug"},` +
		`"limit":{"type":"integer","minimum":1,"maximum":50,"default":10,"description":"Page size"},` +
		`"cursor":{"type":"string","description":"nextCursor of the previous page"}}}`

	searchIssuesOutput = `{"type":"object","properties":{` +
		`"issues":{"type":"array","items":` + issueSummarySchema + `},` +
		`"total":{"type":"integer","minimum":0,"description":"Matches over all pages"},` +
		`"nextCursor":{"type":"string","description":"Present when more matches follow"}},` +
		`"required":["issues","total"]}`

	getIssueInput = `{"type":"object","properties":{"id":{"type":"string","description":"Issue id, e.g. WEB-1"}},"required":["id"]}`

	listPeopleInput  = `{"type":"object","properties":{"team":{"type":"string","enum":["platform","web","mobile"]}}}`
	listPeopleOutput = `{"type":"object","properties":{"people":{"type":"array","items":` + personSchema + `}},"required":["people"]}`

	getPersonInput  = `{"type":"object","properties":{"id":{"type":"string","description":"Person id, e.g. u-ben"}},"required":["id"]}`
	getPersonOutput = `{"type":"object","properties":{"person":` + personSchema + `,` +
		`"activeIssues":{"type":"array","items":` + issueSummarySchema + `,"description":"Open and in-progress issues assigned to the person"},` +
		`"reportedCount":{"type":"integer","minimum":0}},"required":["person","activeIssues","reportedCount"]}`

	listLabelsOutput = `{"type":"object","properties":{"labels":{"type":"array","items":{"type":"object","properties":{` +
		`"name":{"type":"string"},"color":{"type":"string"},"description":{"type":"string"},"issueCount":{"type":"integer","minimum":0}},` +
		`"required":["name","color","description","issueCount"]}}},"required":["labels"]}`

	addCommentInput = `{"type":"object","properties":{` +
		`"issueId":{"type":"string","description":"Issue id, e.g. WEB-1"},` +
		`"body":{"type":"string","minLength":1,"maxLength":4000,"description":"Comment text"},` +
		`"author":{"type":"string","description":"Person id of the author (default u-ada)"}},` +
		`"required":["issueId","body"]}`
	addCommentOutput = `{"type":"object","properties":{"issueId":{"type":"string"},"comment":` + commentSchema + `,` +
		`"commentCount":{"type":"integer","minimum":1}},"required":["issueId","comment","commentCount"]}`
)
